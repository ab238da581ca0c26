package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

// run is the whole scenario; what failed is in the result's Errors.
func run(ctx context.Context, f flags, log *slog.Logger) Result {
	var res Result
	fail := func(err error) Result {
		res.Errors = append(res.Errors, err.Error())
		return res
	}
	d, err := setupDatabase(ctx, f)
	if d != nil {
		defer d.Close()
	}
	if err != nil {
		return fail(fmt.Errorf("database: %w", err))
	}
	log.Info("private MariaDB up, TLS required, migrated by sluice migrate, consumer granted as documented", "addr", d.srv.Addr)
	if err := d.checkTLS(ctx, &res); err != nil {
		return fail(err)
	}
	p, err := newPaths(ctx, f, d, log)
	if p != nil {
		defer p.Close()
	}
	if err != nil {
		return fail(err)
	}
	res.Sent = 2 * f.messages
	if err := p.start(ctx); err != nil {
		return fail(err)
	}
	if err := p.waitStored(ctx, res.Sent/3); err != nil {
		return fail(fmt.Errorf("before the rotation: %w", err))
	}
	sqsBefore, kafkaBefore := p.byPath(ctx)
	if err := p.rotate(ctx, &res); err != nil {
		return fail(fmt.Errorf("rotation: %w", err))
	}
	log.Info("password rotated on MariaDB and in Secrets Manager, connections killed", "stored", sqsBefore+kafkaBefore)
	waitErr := p.waitStored(ctx, res.Sent)
	p.stopConsumers()
	// Counted past the deadline too, so that a run that timed out says
	// what it stored.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	if err := p.count(cctx, &res); err != nil {
		return fail(err)
	}
	sqsAfter, kafkaAfter := p.byPath(cctx)
	res.StoredAfterRotation = map[string]int{"sqs_lambda": sqsAfter - sqsBefore, "kafka_worker": kafkaAfter - kafkaBefore}
	if waitErr != nil {
		return fail(fmt.Errorf("after the rotation: %w", waitErr))
	}
	return res
}

// paths are the two consumers and what they consume from.
type paths struct {
	f       flags
	d       *database
	log     *slog.Logger
	env     consumers.Env
	st      *consumers.Stack
	secrets *secretsmanager.Client
	secret  string
	kafka   *kafkaPath
	closers []func()
}

// newPaths makes the secret (RDS-managed form: username and password),
// the queue, DLQ and RATE item, and the Kafka topic, and sends the
// messages: seq 0..n-1 to SQS, n..2n-1 to Kafka.
func newPaths(ctx context.Context, f flags, d *database, log *slog.Logger) (*paths, error) {
	root, _ := os.Getwd()
	run := strconv.FormatInt(time.Now().UnixNano(), 36)
	p := &paths{f: f, d: d, log: log, secret: "rds!cluster-e2e-" + run,
		env: consumers.Env{AWSEndpoint: os.Getenv("AWS_ENDPOINT_URL"), SQSEndpoint: os.Getenv("AWS_ENDPOINT_URL_SQS"),
			RIE: or(f.rie, e2ekit.RIEPath(root)), Root: root, WorkDir: f.logDir, Log: log}}
	if err := os.MkdirAll(f.logDir, 0o755); err != nil {
		return p, err
	}
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return p, err
	}
	p.secrets = secretsmanager.NewFromConfig(cfg)
	if _, err := p.secrets.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(p.secret),
		SecretString: aws.String(credentials(firstPassword))}); err != nil {
		return p, fmt.Errorf("create secret: %w", err)
	}
	p.closers = append(p.closers, func() {
		p.secrets.DeleteSecret(context.Background(), &secretsmanager.DeleteSecretInput{SecretId: aws.String(p.secret), ForceDeleteWithoutRecovery: aws.Bool(true)})
	})
	if p.st, err = p.env.NewStack(ctx, "sl-rds-"+run, f.rate, 3); err != nil {
		return p, err
	}
	p.closers = append(p.closers, p.st.Close)
	if _, err := consumers.Produce(ctx, p.st.SQS, p.st.QueueURL, f.messages, 0); err != nil {
		return p, err
	}
	p.kafka = &kafkaPath{brokers: strings.Split(or(os.Getenv("SLUICE_KAFKA_BROKERS"), "127.0.0.1:9092"), ","), topic: "sluice-e2e-rds-" + run}
	p.closers = append(p.closers, p.kafka.Close)
	return p, p.kafka.produce(ctx, f.messages, f.messages)
}

// credentials is the document of an RDS-managed secret.
func credentials(password string) string {
	return fmt.Sprintf(`{"username":%q,"password":%q}`, consumerUser, password)
}

// dbEnv is what both consumers get to reach the database: the secret,
// where to connect, the CA, and a short connection lifetime so that the
// pools reconnect (and meet the rotated password) within the run.
func (p *paths) dbEnv() map[string]string {
	host, port, _ := strings.Cut(p.d.srv.Addr, ":")
	return map[string]string{"SLUICE_SINK": "mysql", "SLUICE_MYSQL_SECRET": p.secret, "SLUICE_MYSQL_HOST": host,
		"SLUICE_MYSQL_PORT": port, "SLUICE_MYSQL_DATABASE": dbName, "SLUICE_MYSQL_CA": p.d.srv.CA,
		"SLUICE_MYSQL_CONN_LIFETIME": "3s", "SLUICE_MIGRATE": "off",
		"SLUICE_LOOP": p.st.Loop, "SLUICE_TABLE": p.st.Table, "SLUICE_SAFE_RATE": "10"}
}

// start starts the SQS Lambda behind its mapping and the Kafka worker.
func (p *paths) start(ctx context.Context) error {
	logf, err := os.Create(filepath.Join(p.f.logDir, "consumers.log"))
	if err != nil {
		return err
	}
	p.closers = append(p.closers, func() { logf.Close() })
	env := p.dbEnv()
	env["SLUICE_DLQ_URL"], env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = p.st.DLQURL, "30"
	fn, err := p.env.StartRIE(ctx, p.f.consumer, env, logf)
	if err != nil {
		return err
	}
	p.closers = append(p.closers, fn.Stop)
	mctx, stop := context.WithCancel(ctx)
	mp := &consumers.Mapping{SQS: p.st.SQS, QueueURL: p.st.QueueURL, ARN: p.st.QueueARN, Visibility: 5 * time.Second}
	done := make(chan struct{})
	go func() { mp.Run(mctx, fn); close(done) }()
	p.closers = append(p.closers, func() { stop(); <-done })

	wenv := p.dbEnv()
	wenv["SOURCE"], wenv["SLUICE_KAFKA_BROKERS"] = "kafka", strings.Join(p.kafka.brokers, ",")
	wenv["SLUICE_KAFKA_TOPICS"], wenv["SLUICE_KAFKA_GROUP"] = p.kafka.topic, p.kafka.topic
	w, err := p.env.StartWorker(p.f.worker, wenv, logf)
	if err != nil {
		return err
	}
	p.kafka.worker = w
	p.closers = append(p.closers, w.Kill)
	return nil
}

// stopConsumers stops the worker (SIGTERM: it drains and commits) before
// the counts.
func (p *paths) stopConsumers() {
	if p.kafka.worker != nil {
		if err := p.kafka.worker.Terminate(30 * time.Second); err != nil {
			p.log.Warn("worker stop", "err", err)
		}
	}
}

// stored counts the rows of the messages table (-1 when unreadable).
func (p *paths) stored(ctx context.Context) int {
	var n int
	if err := p.d.admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages").Scan(&n); err != nil {
		return -1
	}
	return n
}

// byPath counts the rows each path stored: seq below f.messages came
// from SQS, the others from Kafka.
func (p *paths) byPath(ctx context.Context) (sqs, kafka int) {
	q := "SELECT COALESCE(SUM(CAST(JSON_VALUE(body, '$.seq') AS SIGNED) < ?), 0), COUNT(*) FROM messages"
	var total int
	if err := p.d.admin.QueryRowContext(ctx, q, p.f.messages).Scan(&sqs, &total); err != nil {
		p.log.Warn("count by path", "err", err)
	}
	return sqs, total - sqs
}

// waitStored waits until n rows are stored.
func (p *paths) waitStored(ctx context.Context, n int) error {
	err := poll.Until(ctx, 200*time.Millisecond, func() (bool, error) { return p.stored(ctx) >= n, nil })
	if err != nil {
		return fmt.Errorf("%d of %d rows stored: %w", p.stored(context.WithoutCancel(ctx)), n, err)
	}
	return nil
}

// rotate changes the consumer's password on MariaDB and in the secret,
// then kills the consumer's open connections (as a failover or the
// connection lifetime would end them): every later connection must read
// the new secret. rotated is set when the old password is refused and
// the new one accepted.
func (p *paths) rotate(ctx context.Context, res *Result) error {
	if err := p.d.srv.Admin(fmt.Sprintf("ALTER USER '%s'@'%%' IDENTIFIED BY '%s'", consumerUser, newPassword)); err != nil {
		return err
	}
	if _, err := p.secrets.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: aws.String(p.secret),
		SecretString: aws.String(credentials(newPassword))}); err != nil {
		return fmt.Errorf("put secret value: %w", err)
	}
	if err := p.d.killConnections(ctx); err != nil {
		return err
	}
	oldErr := p.d.ping(ctx, firstPassword)
	newErr := p.d.ping(ctx, newPassword)
	res.Rotated = oldErr != nil && strings.Contains(oldErr.Error(), "1045") && newErr == nil
	return newErr
}

// count fills res from the table, the DLQ and the dead-letter topic.
func (p *paths) count(ctx context.Context, res *Result) error {
	c, err := mysqltest.Count(ctx, p.d.admin, res.Sent, nil)
	if err != nil {
		return err
	}
	res.Stored, res.Missing, res.Duplicates = c.Stored, c.Missing, c.Duplicates
	copies, _, err := consumers.DeadLetters(ctx, p.st.SQS, p.st.DLQURL, func(_ types.Message) bool { return false })
	if err != nil {
		return err
	}
	for _, n := range copies {
		res.HealthyDeadLettered += n
	}
	dlt, err := p.kafka.deadLettered(ctx)
	res.HealthyDeadLettered += dlt
	return err
}

// Close releases what the paths made, last made first.
func (p *paths) Close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
