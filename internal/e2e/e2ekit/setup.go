package e2ekit

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/e2e/verdict"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// Report prints res, the run's result whose verdict v is, as the JSON last
// line on stdout and returns the exit code: 1 when a check failed. The
// seconds are whole ones.
func (r *Run) Report(res any, v *verdict.Verdict) int {
	*v = verdict.Of(r.Start, r.Failures)
	v.Seconds = math.Round(time.Since(r.Start).Seconds())
	return verdict.Print(res, *v)
}

// Harness is the run of a harness whose flags are C and whose result, the
// JSON last line, is R (a struct that embeds verdict.Verdict last).
type Harness[C, R any] struct {
	Run
	Cfg C
	Res R
}

// Execute runs the harness named name on its flags cfg: setup then
// scenario within timeout (Main), then prints Res, whose verdict v is, as
// the JSON last line (Report) and returns Report's exit code: 1 when
// setup or a check failed. The harness's main exits with it.
func (h *Harness[C, R]) Execute(name string, cfg C, timeout time.Duration, setup, scenario func() error, v *verdict.Verdict) int {
	h.Name, h.Start, h.Cfg = name, time.Now(), cfg
	h.Main(timeout, setup, scenario)
	return h.Report(&h.Res, v)
}

// Go runs f in a goroutine until the run ends: at its end the run cancels
// f's context and waits for f to return.
func (r *Run) Go(f func(ctx context.Context)) {
	ctx, stop := context.WithCancel(r.Ctx)
	var wg sync.WaitGroup
	r.Defer(func() { stop(); wg.Wait() })
	wg.Add(1)
	go func() { defer wg.Done(); f(ctx) }()
}

// FindRIE is the Lambda Runtime Interface Emulator: flagValue when set,
// else $SLUICE_RIE_BIN, root's .cache/bin/aws-lambda-rie or the one on
// PATH.
func FindRIE(flagValue, root string) (string, error) {
	if flagValue != "" {
		return flagValue, nil
	}
	return harness.FindBinary("SLUICE_RIE_BIN", "aws-lambda-rie", filepath.Join(root, ".cache/bin/aws-lambda-rie"))
}

// RIEPath is the emulator the benchmarks and the chaos suite start:
// $SLUICE_RIE_BIN, else root's .cache/bin/aws-lambda-rie, whether or not
// it exists yet (FindRIE is the harnesses', which checks).
func RIEPath(root string) string {
	if rie := os.Getenv("SLUICE_RIE_BIN"); rie != "" {
		return rie
	}
	return filepath.Join(root, ".cache/bin/aws-lambda-rie")
}

// OpenWorkloadDB creates the database name in the MariaDB of
// SLUICE_MYSQL_DSN (CreateDatabase), opens it with at most maxOpen
// connections (0: no limit; closed at the run's end) and installs the
// workload w and the orders table. It returns the database, its DSN and
// the server's address (for MariaDBPID).
func (r *Run) OpenWorkloadDB(name string, keep bool, maxOpen int, w dbload.Workload) (db *sql.DB, dsn, addr string, err error) {
	cfg, err := mysql.ParseDSN(os.Getenv("SLUICE_MYSQL_DSN"))
	if err != nil {
		return nil, "", "", fmt.Errorf("SLUICE_MYSQL_DSN: %w", err)
	}
	if dsn, err = r.CreateDatabase(cfg, name, keep); err != nil {
		return nil, "", "", err
	}
	if db, err = sql.Open("mysql", dsn); err != nil {
		return nil, "", "", err
	}
	db.SetMaxOpenConns(maxOpen)
	r.Defer(func() { db.Close() })
	if err := dbload.Install(r.Ctx, db, w); err != nil {
		return nil, "", "", err
	}
	if err := InstallOrders(r.Ctx, db); err != nil {
		return nil, "", "", err
	}
	return db, dsn, cfg.Addr, nil
}

// CreateDatabase creates the database name on the server of cfg and
// returns the DSN of cfg with name as its database; the run drops the
// database at its end unless keep.
func (r *Run) CreateDatabase(cfg *mysql.Config, name string, keep bool) (string, error) {
	adminDSN := cfg.FormatDSN()
	admin, err := sql.Open("mysql", adminDSN)
	if err != nil {
		return "", err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(r.Ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	if !keep {
		r.Defer(func() {
			if db, err := sql.Open("mysql", adminDSN); err == nil {
				db.Exec("DROP DATABASE IF EXISTS " + name)
				db.Close()
			}
		})
	}
	own := cfg.Clone()
	own.DBName = name
	return own.FormatDSN(), nil
}

// CreateTable creates the loops' table with the project's init script
// (localstack/init/10-controller.sh) and disables the script's default
// loop (placeholder-id), so that only the run's loops tick; the run
// deletes the table at its end unless keep.
func (r *Run) CreateTable(table, id, instance string, keep bool) error {
	initScript := exec.CommandContext(r.Ctx, "bash", "localstack/init/10-controller.sh")
	initScript.Env = append(os.Environ(), "SLUICE_TABLE="+table, "SLUICE_LOOP=placeholder-"+id, "SLUICE_DB_INSTANCE="+instance)
	if out, err := initScript.CombinedOutput(); err != nil {
		return fmt.Errorf("10-controller.sh: %w: %s", err, out)
	}
	if err := AWS(r.Ctx, "dynamodb", "update-item", "--table-name", table, "--key", Key("placeholder-"+id, "PARAMS"),
		"--update-expression", "SET enabled = :f", "--expression-attribute-values", `{":f":{"BOOL":false}}`); err != nil {
		return err
	}
	if !keep {
		r.Defer(func() { AWS(context.Background(), "dynamodb", "delete-table", "--table-name", table) })
	}
	return nil
}

// CreateQueue creates the SQS queue name with attrs and returns its URL
// and ARN; the run deletes the queue at its end unless keep.
func (r *Run) CreateQueue(api *sqs.Client, name string, attrs map[string]string, keep bool) (url, arn string, err error) {
	q, err := api.CreateQueue(r.Ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("create queue %s: %w", name, err)
	}
	if !keep {
		r.Defer(func() { api.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	}
	arn, err = localaws.LookupQueueARN(r.Ctx, api, aws.ToString(q.QueueUrl))
	return aws.ToString(q.QueueUrl), arn, err
}

// Item reads the item (pk, sk) of table, strongly consistent.
func Item(ctx context.Context, api *dynamodb.Client, table, pk, sk string) (map[string]ddbtypes.AttributeValue, error) {
	out, err := api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: pk}, "sk": &ddbtypes.AttributeValueMemberS{Value: sk}}})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// Manual puts loopID in manual mode at rate msg/s with the aws CLI, as an
// operator drains a queue.
func Manual(ctx context.Context, table, loopID string, rate float64) error {
	if err := SetParam(ctx, table, loopID, "manual_rate", fmt.Sprintf(`{"N":"%g"}`, rate)); err != nil {
		return err
	}
	return SetParam(ctx, table, loopID, "mode", `{"S":"manual"}`)
}

// PublishCPU publishes s's CPU to CloudWatch as instance's AWS/RDS
// CPUUtilization every period, each datapoint delay after its period ends,
// until the run ends; onDatapoint (may be nil) sees every datapoint.
func (r *Run) PublishCPU(awsCfg aws.Config, s *cpupub.Sampler, instance string, period, delay time.Duration, onDatapoint func(cpupub.Datapoint)) {
	pub := &cpupub.Publisher{CPU: s, API: cwmetric.NewClient(awsCfg, awsconf.Endpoint()), Instance: instance,
		Period: period, Delay: delay, Clock: consume.WallClock{}, OnDatapoint: onDatapoint}
	r.Go(func(ctx context.Context) { pub.Run(ctx) })
}

// RecordCPU samples s every second until the run ends and passes record
// the CPU utilization since the previous sample, with the time of the
// sample. stall (may be nil) sees a gap of more than 3 s between two
// samples: this process was not scheduled.
func (r *Run) RecordCPU(s *cpupub.Sampler, record func(at time.Time, cpu float64), stall func(gap time.Duration)) {
	r.Go(func(ctx context.Context) {
		prev, err := s.Sample()
		if err != nil {
			return
		}
		Every(ctx, time.Second, func() {
			cur, err := s.Sample()
			if err != nil {
				return
			}
			if gap := cur.At.Sub(prev.At); gap > 3*time.Second && stall != nil {
				stall(gap)
			}
			if u, err := s.Utilization(prev, cur); err == nil {
				record(cur.At, u)
			}
			prev = cur
		})
	})
}
