// Package kafka runs the kafka-worker and kafka-lambda no-loss scenarios of
// the consumers benchmark (`make bench-consumers`): messages go into a Kafka
// topic, real worker processes (functions/worker, SOURCE=kafka,
// SLUICE_SINK=mysql), or the real kafka-consumer Lambda bootstrap under the
// emulator behind an emulated event source mapping (Config.Lambda), consume
// them into MariaDB while faults are injected, and the table, the
// dead-letter topic and the group's offsets are counted at the end.
//
// Faults, in order, each once a share of the messages is stored: a second
// worker joins the group (a rebalance); the first worker is SIGKILLed (no
// commit, no leave) and restarted (another rebalance, and the dead member's
// partitions wait for its session timeout); MariaDB is restarted with
// `$SLUICE_MARIADB_CTL restart` when Config.MariaDBCtl is set. Every
// PoisonEvery-th message is malformed and must end in "<topic>.dlt" with its
// reason.
package kafka

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/poll"
	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

// Path is the scenario's name in the benchmark's no_loss table.
const Path = "kafka-worker"

// Config configures the scenario.
type Config struct {
	// Brokers are the Kafka seed brokers.
	Brokers []string
	// DSN is a go-sql-driver DSN of MariaDB whose user may create databases:
	// the scenario runs in a fresh database next to it, dropped at the end.
	DSN string
	// WorkerBin is the functions/worker binary (see BuildWorker).
	WorkerBin string
	// Lambda, when set, runs the kafka-lambda path instead of the workers:
	// the functions/kafka-consumer bootstrap under the emulator behind
	// localaws.KafkaPoller (see lambda.go).
	Lambda *Lambda
	// Messages is how many messages are sent (default 10,000).
	Messages int
	// Partitions of the topic (default 4).
	Partitions int32
	// PoisonEvery makes every PoisonEvery-th message malformed (default
	// 1,000; negative: none).
	PoisonEvery int
	// Rate is the aggregate allowed rate of the workers, messages/s (their
	// safe rate: no RATE item exists for the scenario's loop; default 500).
	Rate float64
	// MariaDBCtl is the MariaDB control script ($SLUICE_MARIADB_CTL); ""
	// skips the MariaDB restart.
	MariaDBCtl string
	// Timeout bounds the wait for every message to be stored or
	// dead-lettered (default 4 x Messages/Rate + 2 min).
	Timeout time.Duration
	// WorkerLog receives the workers' logs (default: discarded).
	WorkerLog io.Writer
	// Log receives the scenario's progress (default: discarded).
	Log *slog.Logger
}

func (c Config) withDefaults() Config {
	c.Messages = defaults.Positive(c.Messages, 10000)
	c.Partitions = defaults.Positive(c.Partitions, 4)
	if c.PoisonEvery == 0 {
		c.PoisonEvery = 1000
	}
	c.Rate = defaults.Positive(c.Rate, 500)
	if c.Timeout <= 0 {
		c.Timeout = time.Duration(4*float64(c.Messages)/c.Rate*float64(time.Second)) + 2*time.Minute
	}
	if c.WorkerLog == nil {
		c.WorkerLog = io.Discard
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// poison reports whether message seq is malformed.
func (c Config) poison(seq int) bool {
	return c.PoisonEvery > 0 && seq%c.PoisonEvery == c.PoisonEvery-1
}

// Result is one row of the benchmark's no_loss table (the counts every
// no-loss path reports: Sent counts messages produced, poison included;
// Stored rows in the messages table; Poison malformed messages found in the
// dead-letter topic), with what was checked beside it.
type Result struct {
	consumers.NoLoss
	// PoisonSent counts the malformed messages sent.
	PoisonSent int `json:"poison_sent"`
	// Uncommitted counts offsets the group had not committed after the last
	// worker's SIGTERM (0: every stored or dead-lettered record committed).
	Uncommitted int64 `json:"uncommitted"`
}

// BuildWorker builds functions/worker from the module at moduleDir into dir
// and returns the binary's path.
func BuildWorker(ctx context.Context, moduleDir, dir string) (string, error) {
	bin := filepath.Join(dir, "worker")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./functions/worker")
	cmd.Dir = moduleDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build functions/worker: %w\n%s", err, out)
	}
	return bin, nil
}

// scenario is one run's state.
type scenario struct {
	cfg   Config
	run   string
	topic string
	db    *sql.DB
	dsn   string
	cl    *kgo.Client
	adm   *kadm.Client
	path  string
	procs []*exec.Cmd
	// lambdas are the emulated mapping's members (kafka-lambda).
	lambdas []*lambdaMember
	// pacing is set in a pacing run (PaceLambda).
	pacing bool
	faults []string
}

// NoLoss runs the scenario and returns its counts. An error means the
// scenario could not run or did not finish in time; the counts gathered are
// returned with it.
func NoLoss(ctx context.Context, cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	start := time.Now()
	s := &scenario{cfg: cfg, run: fmt.Sprintf("%d", time.Now().UnixNano()), path: Path}
	if cfg.Lambda != nil {
		s.path = LambdaPath
	}
	if len(cfg.Brokers) == 0 || cfg.DSN == "" || (cfg.WorkerBin == "" && cfg.Lambda == nil) {
		return Result{NoLoss: consumers.NoLoss{Path: s.path}}, fmt.Errorf("kafka no-loss: brokers, DSN and a worker binary or a Lambda are required")
	}
	s.topic = "sluice-bench-" + s.run
	defer s.stopAll(syscall.SIGKILL)
	defer s.stopLambdas()

	dropDB, err := s.openDatabase(ctx)
	if err != nil {
		return Result{NoLoss: consumers.NoLoss{Path: s.path}}, err
	}
	defer dropDB()
	if s.cl, err = kgo.NewClient(kgo.SeedBrokers(cfg.Brokers...), kgo.DefaultProduceTopic(s.topic),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.ProducerLinger(5*time.Millisecond)); err != nil {
		return Result{NoLoss: consumers.NoLoss{Path: s.path}}, fmt.Errorf("kafka client: %w", err)
	}
	defer s.cl.Close()
	s.adm = kadm.NewClient(s.cl)
	poisonSent, err := s.produce(ctx)
	if err != nil {
		return Result{NoLoss: consumers.NoLoss{Path: s.path}}, err
	}

	runErr := s.inject(ctx, poisonSent)
	s.stopAll(syscall.SIGTERM)
	s.stopLambdas()
	res, err := s.count(ctx, poisonSent)
	res.Seconds = time.Since(start).Seconds()
	return res, errors.Join(runErr, err)
}

// openDatabase creates and migrates a fresh database and returns its dropper.
func (s *scenario) openDatabase(ctx context.Context) (func(), error) {
	mc, err := mysql.ParseDSN(s.cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("parse MySQL DSN: %w", err)
	}
	admin, err := sql.Open("mysql", s.cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("open MySQL: %w", err)
	}
	name := "sluice_kbench_" + s.run
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return nil, fmt.Errorf("create database %s: %w", name, err)
	}
	mc.DBName = name
	s.dsn = mc.FormatDSN()
	drop := func() {
		if s.db != nil {
			s.db.Close()
		}
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(dctx, "DROP DATABASE IF EXISTS "+name); err != nil {
			s.cfg.Log.Warn("drop benchmark database", "database", name, "err", err)
		}
		admin.Close()
	}
	if s.db, err = sql.Open("mysql", s.dsn); err != nil {
		drop()
		return nil, fmt.Errorf("open MySQL %s: %w", name, err)
	}
	if err := mysqlsink.Migrate(ctx, s.db); err != nil {
		drop()
		return nil, err
	}
	return drop, nil
}

// produce creates the topic and its dead-letter topic and sends the
// messages: body {"seq":n,...} (or a malformed one), header message-id and
// seq.
func (s *scenario) produce(ctx context.Context) (poison int, err error) {
	if _, err := s.adm.CreateTopic(ctx, s.cfg.Partitions, 1, nil, s.topic); err != nil {
		return 0, fmt.Errorf("create topic %s: %w", s.topic, err)
	}
	if _, err := s.adm.CreateTopic(ctx, 1, 1, nil, s.topic+".dlt"); err != nil {
		return 0, fmt.Errorf("create topic %s.dlt: %w", s.topic, err)
	}
	const chunk = 1000
	for from := 0; from < s.cfg.Messages; from += chunk {
		recs := make([]*kgo.Record, 0, chunk)
		for i := from; i < min(from+chunk, s.cfg.Messages); i++ {
			body := fmt.Sprintf(`{"seq":%d,"run":%q,"payload":"order %d"}`, i, s.run, i)
			if s.cfg.poison(i) {
				body = fmt.Sprintf("malformed order %d {", i)
				poison++
			}
			recs = append(recs, &kgo.Record{Value: []byte(body), Headers: []kgo.RecordHeader{
				{Key: "message-id", Value: []byte(fmt.Sprintf("kb-%s-%d", s.run, i))},
				{Key: "seq", Value: []byte(strconv.Itoa(i))},
			}})
		}
		if err := s.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return 0, fmt.Errorf("produce to %s: %w", s.topic, err)
		}
	}
	s.cfg.Log.Info("produced", "topic", s.topic, "messages", s.cfg.Messages, "poison", poison)
	return poison, nil
}

// start starts a worker process, or a member of the emulated mapping.
func (s *scenario) start(name string) error {
	if s.cfg.Lambda != nil {
		return s.startLambda(name)
	}
	return s.startWorker(name)
}

// killFirst SIGKILLs the first worker (or the first mapping member's
// emulator and function mid-batch) and returns the fault's name.
func (s *scenario) killFirst() string {
	if s.cfg.Lambda != nil {
		s.killLambda(0)
		return "SIGKILL the emulator and function of member w1 (its poller leaves uncommitted), then a new member"
	}
	_ = s.procs[0].Process.Signal(syscall.SIGKILL)
	_ = s.procs[0].Wait()
	return "SIGKILL worker w1, then restart it"
}

// startWorker starts a worker process.
func (s *scenario) startWorker(name string) error {
	cmd := exec.Command(s.cfg.WorkerBin)
	env := append(s.functionEnv(), "SOURCE=kafka", "SLUICE_KAFKA_TOPICS="+s.topic, "SLUICE_KAFKA_GROUP="+s.topic,
		"SLUICE_BATCH_SIZE=50", "SLUICE_METRICS_ADDR=off")
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = s.cfg.WorkerLog, s.cfg.WorkerLog
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start worker %s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	s.cfg.Log.Info("worker started", "name", name, "pid", cmd.Process.Pid)
	return nil
}

// stopAll signals every running worker and waits for it (SIGKILL after 30 s).
func (s *scenario) stopAll(sig syscall.Signal) {
	for _, p := range s.procs {
		if p.ProcessState != nil {
			continue
		}
		_ = p.Process.Signal(sig)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
}

// stored counts rows (0 while MariaDB is down).
func (s *scenario) stored(ctx context.Context) int {
	var n int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages").Scan(&n); err != nil {
		return 0
	}
	return n
}

// waitStored waits until at least n rows are stored.
func (s *scenario) waitStored(ctx context.Context, n int, deadline time.Time) error {
	return poll.Until(ctx, 100*time.Millisecond, func() (bool, error) {
		if s.stored(ctx) >= n {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("timed out waiting for %d stored messages (have %d)", n, s.stored(ctx))
		}
		return false, nil
	})
}

// inject runs the workers and the faults, and waits until every valid
// message is stored and every poison one dead-lettered.
func (s *scenario) inject(ctx context.Context, poison int) error {
	deadline := time.Now().Add(s.cfg.Timeout)
	valid := s.cfg.Messages - poison
	fault := func(f string) {
		s.faults = append(s.faults, f)
		s.cfg.Log.Info("fault", "fault", f, "stored", s.stored(ctx))
	}
	if err := s.start("w1"); err != nil {
		return err
	}
	if err := s.waitStored(ctx, valid*15/100, deadline); err != nil {
		return err
	}
	fault(map[bool]string{false: "rebalance: second worker joins", true: "rebalance: second mapping member joins"}[s.cfg.Lambda != nil])
	if err := s.start("w2"); err != nil {
		return err
	}
	if err := s.waitStored(ctx, valid*35/100, deadline); err != nil {
		return err
	}
	fault(s.killFirst())
	if err := s.start("w1-restarted"); err != nil {
		return err
	}
	if s.cfg.MariaDBCtl != "" {
		if err := s.waitStored(ctx, valid*55/100, deadline); err != nil {
			return err
		}
		fault("MariaDB restart")
		if out, err := exec.CommandContext(ctx, s.cfg.MariaDBCtl, "restart").CombinedOutput(); err != nil {
			return fmt.Errorf("%s restart: %w\n%s", s.cfg.MariaDBCtl, err, out)
		}
	}
	if err := s.waitStored(ctx, valid, deadline); err != nil {
		return err
	}
	return poll.Until(ctx, 200*time.Millisecond, func() (bool, error) {
		dead, err := s.deadLettered(ctx)
		if err == nil && len(dead) >= poison {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("timed out waiting for %d dead letters (have %d, err %v)", poison, len(dead), err)
		}
		return false, nil
	})
}

// deadLettered reads the dead-letter topic and returns the seq of each
// record, true when it carries a reason.
func (s *scenario) deadLettered(ctx context.Context) (map[int]bool, error) {
	out := map[int]bool{}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := ReadAll(rctx, s.cfg.Brokers, s.topic+".dlt", func(r *kgo.Record) {
		if n, err := strconv.Atoi(Header(r, "seq")); err == nil {
			out[n] = out[n] || Header(r, kafkasource.HeaderReason) != ""
		}
	})
	return out, err
}

// ReadAll reads topic from the start up to its end offsets and calls each
// on every record.
func ReadAll(ctx context.Context, brokers []string, topic string, each func(*kgo.Record)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return fmt.Errorf("read %s: %w", topic, err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	want := int64(0)
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	for got := int64(0); got < want; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("read %s: %d of %d records: %w", topic, got, want, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			each(r)
		})
	}
	return nil
}

// Header returns the value of r's header key, empty when it has none.
func Header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// count gathers the result after the workers stopped.
func (s *scenario) count(ctx context.Context, poisonSent int) (Result, error) {
	res := Result{NoLoss: consumers.NoLoss{Path: s.path, Sent: s.cfg.Messages, Faults: s.faults}, PoisonSent: poisonSent}
	dead, err := s.deadLettered(ctx)
	if err != nil {
		return res, err
	}
	res.Poison = len(dead)
	for _, withReason := range dead {
		if withReason {
			res.PoisonWithReason++
		}
	}
	c, err := mysqltest.Count(ctx, s.db, s.cfg.Messages, dead)
	if err != nil {
		return res, err
	}
	res.Stored, res.Duplicates, res.Missing = c.Stored, c.Duplicates, c.Missing
	ends, err := s.adm.ListEndOffsets(ctx, s.topic)
	if err != nil {
		return res, fmt.Errorf("end offsets of %s: %w", s.topic, err)
	}
	offs, err := s.adm.FetchOffsetsForTopics(ctx, s.topic, s.topic)
	if err != nil {
		return res, fmt.Errorf("committed offsets of group %s: %w", s.topic, err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		at := int64(0)
		if o, ok := offs.Lookup(e.Topic, e.Partition); ok && o.Err == nil && o.At > 0 {
			at = o.At
		}
		res.Uncommitted += e.Offset - at
	})
	return res, nil
}
