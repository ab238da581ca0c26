// Command tune is `make e2e-tune`: tuning a loop in production, on the real
// plant. The path of docs/tuning.md (history, proposal, shadow) on MariaDB,
// with no open-loop step test anywhere.
//
// It uses the local stack that is already running (moto for DynamoDB and
// CloudWatch, the SQS server, MariaDB; localstack/stack/env.sh) and starts
// only its own pieces: a fresh database with the per-message workload
// (internal/dbload), a fresh table and queue, the controller and SQS
// consumer bootstraps under the Lambda Runtime Interface Emulator, driven by
// the stand-ins of internal/localaws, and the CPU publisher of
// internal/cpupub (MariaDB's CPU as AWS/RDS CPUUtilization). The controller
// writes the dashboard's HIST items, one per loop per tick.
//
// The run (scenario.go):
//
//  1. the live loop runs on hand-picked gains (the sample PARAMS' ki and a
//     kp this plant survives) while the traffic excites it the way
//     production does: a setpoint edit, the producers stopping (the queue
//     drains and sits idle) and a burst;
//  2. `sluice tune --from-history --loop LIVE --json` identifies the plant
//     from the loop's HIST items and proposes gains (or refuses, with the
//     reason);
//  3. a shadow loop (a second PARAMS item, mode shadow, the proposal's
//     parameters, the same metric) runs beside the live one through another
//     setpoint edit and an outside load;
//  4. `sluice tune --loop LIVE --shadow-report --shadow SHADOW --json`
//     compares the two gain sets on the same data (when the sluice binary
//     has the command);
//  5. the queue is drained in manual mode and every message is checked
//     stored exactly once.
//
// Its last line on stdout is one JSON object; it exits 1 when a check fails.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

type config struct {
	e2ekit.Flags
	sluice       string
	setpoints    [3]float64 // start, after the live edit, after the shadow's edit
	kp, ki       float64
	live, shadow time.Duration
}

func main() {
	var c config
	c.Declare("tune", 350_000, 400_000)
	flag.StringVar(&c.sluice, "sluice", "bin/e2e/sluice", "the sluice command (tune --from-history, --shadow-report)")
	flag.Float64Var(&c.setpoints[0], "setpoint", 10, "initial CPU setpoint, percent")
	flag.Float64Var(&c.setpoints[1], "setpoint2", 20, "setpoint after the live phase's edit")
	flag.Float64Var(&c.setpoints[2], "setpoint3", 12, "setpoint after the shadow phase's edit")
	flag.Float64Var(&c.kp, "kp", 0.2, "the live loop's hand-picked kp (msg/s per point)")
	flag.Float64Var(&c.ki, "ki", 0.05, "the live loop's hand-picked ki (msg/s per point-second; the sample PARAMS' value)")
	flag.DurationVar(&c.live, "live", 200*time.Second, "length of the live phase (start-up, edit, idle, burst)")
	flag.DurationVar(&c.shadow, "shadow", 105*time.Second, "length of the shadow phase (edit, outside load)")
	flag.Parse()
	r := &run{}
	os.Exit(r.Execute("e2e-tune", c, 15*time.Minute, r.setup, r.scenario, &r.Res.Verdict))
}

type run struct {
	e2ekit.Harness[config, Result]

	id, table, live, shadow, instance, dbName, queueURL string
	db                                                  *sql.DB
	store                                               *ddbloop.Store
	hist                                                *ddbhistory.Store
	lastStderr                                          string
	sqs                                                 *sqs.Client

	sent      atomic.Int64
	batches   atomic.Int64
	failed    atomic.Int64
	published atomic.Int64
}

func (r *run) setup() error {
	c := r.Cfg
	if os.Getenv("AWS_ENDPOINT_URL") == "" || os.Getenv("SLUICE_MYSQL_DSN") == "" {
		return fmt.Errorf("no local stack in the environment: eval \"$(bash localstack/stack/env.sh)\" (make e2e-tune does)")
	}
	r.id = strconv.FormatInt(time.Now().Unix(), 10)
	r.table, r.instance, r.dbName = "sluice-e2etune-"+r.id, "sluice-e2etune-"+r.id, "sluice_e2etune_"+r.id
	r.live, r.shadow = "tune-live", "tune-shadow"
	root, _ := os.Getwd()
	rie, err := e2ekit.FindRIE(c.RIE, root)
	if err != nil {
		return err
	}
	for _, b := range []string{c.Controller, c.Consumer, c.sluice} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s: %w (make e2e-tune builds it)", b, err)
		}
	}
	dsn, sampler, err := r.database()
	if err != nil {
		return err
	}
	awsCfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return err
	}
	client := dynamodb.NewFromConfig(awsCfg)
	if err := ddbstore.CreateTable(r.Ctx, client, r.table); err != nil {
		return err
	}
	r.store, r.hist = ddbloop.New(client, r.table), ddbhistory.New(client, r.table)
	if !c.Keep {
		r.Defer(func() {
			client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(r.table)})
		})
	}
	if err := r.store.WriteParams(r.Ctx, r.live, r.liveParams().Attrs(looptest.Sources())); err != nil {
		return fmt.Errorf("write the live loop's PARAMS: %w", err)
	}
	r.sqs = sqs.NewFromConfig(awsCfg)
	var queueARN string
	if r.queueURL, queueARN, err = r.CreateQueue(r.sqs, "sluice-e2etune-"+r.id, map[string]string{"VisibilityTimeout": "60"}, c.Keep); err != nil {
		return err
	}

	// The functions under the emulator, the stand-ins that drive them.
	logDir := filepath.Join(c.LogDir, r.id)
	err = r.StartFunctions(e2ekit.Functions{RIE: rie, Controller: c.Controller, Consumer: c.Consumer, LogDir: logDir,
		Env: []string{"SLUICE_TABLE=" + r.table, "AWS_LAMBDA_FUNCTION_TIMEOUT=60"},
		ConsumerEnv: []string{"SLUICE_LOOP=" + r.live, "SLUICE_SINK=mysql", "SLUICE_MYSQL_DSN=" + dsn, "SLUICE_MYSQL_STATEMENT=" + statement,
			"SLUICE_SAFE_RATE=5", "SLUICE_RATE_PERIOD=1s"},
		Consumers: c.Consumers, Tick: c.Tick, SQS: r.sqs, QueueURL: r.queueURL, QueueARN: queueARN, Region: awsCfg.Region,
		OnBatch: func(b localaws.BatchResult) {
			r.batches.Add(1)
			r.failed.Add(int64(b.Failed))
		}})
	if err != nil {
		return err
	}
	r.PublishCPU(awsCfg, sampler, r.instance, c.Tick, 0, func(cpupub.Datapoint) { r.published.Add(1) })
	r.Logf("up: table %s, database %s, controller and %d consumers (logs in %s)", r.table, r.dbName, c.Consumers, logDir)
	return nil
}

// statement is what the consumers run per message: a row per application
// (the id is new each time), so a message applied twice shows as two rows
// with the same seq; the workload's trigger on messages gives each its CPU
// cost.
const statement = `INSERT INTO messages (id, body) VALUES (CONCAT(:json.seq, '#', UUID()), :body)`

// database creates this run's database with the workload and returns the
// consumers' DSN and the sampler of the MariaDB server's CPU.
func (r *run) database() (string, *cpupub.Sampler, error) {
	cfg, err := mysql.ParseDSN(os.Getenv("SLUICE_MYSQL_DSN"))
	if err != nil {
		return "", nil, fmt.Errorf("SLUICE_MYSQL_DSN: %w", err)
	}
	dsn, err := r.CreateDatabase(cfg, r.dbName, r.Cfg.Keep)
	if err != nil {
		return "", nil, err
	}
	if r.db, err = sql.Open("mysql", dsn); err != nil {
		return "", nil, err
	}
	r.Defer(func() { r.db.Close() })
	if err := dbload.Install(r.Ctx, r.db, dbload.Workload{DataRows: r.Cfg.DataRows, ScanRows: r.Cfg.ScanRows}); err != nil {
		return "", nil, err
	}
	s, err := cpupub.NewSampler(0, func() (int, error) { return e2ekit.MariaDBPID(cfg.Addr) }, 0)
	if err != nil {
		return "", nil, err
	}
	r.Res.Cores = s.Cores
	r.Logf("MariaDB pid %d (%g cores), database %s, %d rows scanned per message", s.PID, s.Cores, r.dbName, r.Cfg.ScanRows)
	return dsn, s, nil
}
