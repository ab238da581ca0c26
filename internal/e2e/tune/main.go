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
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/consume"
)

type config struct {
	controller, consumer, sluice, rie string
	tick                              time.Duration
	setpoints                         [3]float64 // start, after the live edit, after the shadow's edit
	kp, ki                            float64
	maxRate                           float64
	consumers                         int
	scanRows, dataRows                int
	live, shadow                      time.Duration
	keep                              bool
	logDir                            string
}

func main() {
	var c config
	e2ekit.BootstrapFlags(&c.controller, &c.consumer, &c.rie)
	flag.StringVar(&c.sluice, "sluice", "bin/e2e/sluice", "the sluice command (tune --from-history, --shadow-report)")
	flag.DurationVar(&c.tick, "tick", 5*time.Second, "controller tick and metric period")
	flag.Float64Var(&c.setpoints[0], "setpoint", 10, "initial CPU setpoint, percent")
	flag.Float64Var(&c.setpoints[1], "setpoint2", 20, "setpoint after the live phase's edit")
	flag.Float64Var(&c.setpoints[2], "setpoint3", 12, "setpoint after the shadow phase's edit")
	flag.Float64Var(&c.kp, "kp", 0.2, "the live loop's hand-picked kp (msg/s per point)")
	flag.Float64Var(&c.ki, "ki", 0.05, "the live loop's hand-picked ki (msg/s per point-second; the sample PARAMS' value)")
	flag.Float64Var(&c.maxRate, "max-rate", 60, "max_rate of the loops, messages/s")
	flag.IntVar(&c.consumers, "consumers", 6, "consumer emulators (the mapping's maximum concurrency)")
	flag.IntVar(&c.scanRows, "scan-rows", 350_000, "rows each message's aggregate reads (its CPU cost)")
	flag.IntVar(&c.dataRows, "data-rows", 400_000, "rows of the workload's data table")
	flag.DurationVar(&c.live, "live", 200*time.Second, "length of the live phase (start-up, edit, idle, burst)")
	flag.DurationVar(&c.shadow, "shadow", 105*time.Second, "length of the shadow phase (edit, outside load)")
	flag.BoolVar(&c.keep, "keep", false, "keep the database, table and queue for inspection")
	flag.StringVar(&c.logDir, "log-dir", ".cache/e2e/tune", "logs of the emulators")
	flag.Parse()
	r := &run{cfg: c, start: time.Now()}
	r.res.Failures = []string{}
	code := r.main()
	r.res.Seconds = math.Round(time.Since(r.start).Seconds())
	r.res.OK = code == 0
	b, err := json.Marshal(r.res)
	if err != nil {
		b = fmt.Appendf(nil, `{"ok":false,"failures":[%q]}`, err.Error())
	}
	fmt.Println(string(b))
	os.Exit(code)
}

type run struct {
	cfg   config
	start time.Time
	res   Result
	ctx   context.Context

	id, table, live, shadow, instance, dbName, queueURL string
	db                                                  *sql.DB
	store                                               *ddbstore.Store
	hist                                                *ddbhistory.Store
	lastStderr                                          string
	sqs                                                 *sqs.Client
	cleanups                                            []func()

	sent      atomic.Int64
	ticks     atomic.Int64
	tickErrs  atomic.Int64
	batches   atomic.Int64
	failed    atomic.Int64
	published atomic.Int64
}

func (r *run) logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "e2e-tune %6.1fs: %s\n", time.Since(r.start).Seconds(), fmt.Sprintf(format, a...))
}

func (r *run) fail(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.logf("FAIL: %s", msg)
	r.res.Failures = append(r.res.Failures, msg)
}

func (r *run) main() int {
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sig, 15*time.Minute)
	defer cancel()
	r.ctx = ctx
	defer func() {
		for i := len(r.cleanups) - 1; i >= 0; i-- {
			r.cleanups[i]()
		}
	}()
	if err := r.setup(); err != nil {
		r.fail("setup: %v", err)
		return 1
	}
	if err := r.scenario(); err != nil {
		r.fail("%v", err)
	}
	if len(r.res.Failures) > 0 {
		return 1
	}
	return 0
}

func (r *run) onExit(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *run) setup() error {
	c := r.cfg
	if os.Getenv("AWS_ENDPOINT_URL") == "" || os.Getenv("SLUICE_MYSQL_DSN") == "" {
		return fmt.Errorf("no local stack in the environment: eval \"$(bash localstack/stack/env.sh)\" (make e2e-tune does)")
	}
	r.id = strconv.FormatInt(time.Now().Unix(), 10)
	r.table, r.instance, r.dbName = "sluice-e2etune-"+r.id, "sluice-e2etune-"+r.id, "sluice_e2etune_"+r.id
	r.live, r.shadow = "tune-live", "tune-shadow"
	root, _ := os.Getwd()
	rie, err := harness.FindBinary("SLUICE_RIE_BIN", "aws-lambda-rie", filepath.Join(root, ".cache/bin/aws-lambda-rie"))
	if c.rie != "" {
		rie, err = c.rie, nil
	}
	if err != nil {
		return err
	}
	for _, b := range []string{c.controller, c.consumer, c.sluice} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s: %w (make e2e-tune builds it)", b, err)
		}
	}
	dsn, sampler, err := r.database()
	if err != nil {
		return err
	}
	awsCfg, err := awsconf.Load(r.ctx)
	if err != nil {
		return err
	}
	client := dynamodb.NewFromConfig(awsCfg)
	if err := ddbstore.CreateTable(r.ctx, client, r.table); err != nil {
		return err
	}
	r.store, r.hist = ddbstore.New(client, r.table), ddbhistory.New(client, r.table)
	if !c.keep {
		r.onExit(func() {
			client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(r.table)})
		})
	}
	if err := r.store.WriteParams(r.ctx, r.live, r.liveParams().Attrs()); err != nil {
		return fmt.Errorf("write the live loop's PARAMS: %w", err)
	}
	r.sqs = sqs.NewFromConfig(awsCfg)
	q, err := r.sqs.CreateQueue(r.ctx, &sqs.CreateQueueInput{QueueName: aws.String("sluice-e2etune-" + r.id),
		Attributes: map[string]string{"VisibilityTimeout": "60"}})
	if err != nil {
		return fmt.Errorf("create queue: %w", err)
	}
	r.queueURL = aws.ToString(q.QueueUrl)
	if !c.keep {
		r.onExit(func() { r.sqs.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	}
	queueARN, err := localaws.LookupQueueARN(r.ctx, r.sqs, r.queueURL)
	if err != nil {
		return err
	}

	// The functions under the emulator, then the stand-ins that drive them.
	logDir := filepath.Join(c.logDir, r.id)
	env := []string{"SLUICE_TABLE=" + r.table, "AWS_LAMBDA_FUNCTION_TIMEOUT=60"}
	ctl, err := harness.StartRIE(r.ctx, rie, c.controller, logDir, "controller", env)
	if err != nil {
		return err
	}
	r.onExit(ctl.Stop)
	bg, stop := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	r.onExit(func() { stop(); wg.Wait() })
	goRun := func(f func(context.Context)) { wg.Add(1); go func() { defer wg.Done(); f(bg) }() }
	for i := range c.consumers {
		ce, err := harness.StartRIE(r.ctx, rie, c.consumer, logDir, fmt.Sprintf("consumer-%d", i+1), append(env,
			"SLUICE_LOOP="+r.live, "SLUICE_SINK=mysql", "SLUICE_MYSQL_DSN="+dsn, "SLUICE_MYSQL_STATEMENT="+statement,
			fmt.Sprintf("SLUICE_CONSUMERS=%d", c.consumers), "SLUICE_SAFE_RATE=5", "SLUICE_RATE_PERIOD=1s"))
		if err != nil {
			return err
		}
		r.onExit(ce.Stop)
		p := &localaws.Poller{API: r.sqs, Invoker: &localaws.RIE{URL: ce.InvokeURL}, QueueURL: r.queueURL, QueueARN: queueARN,
			Region: awsCfg.Region, BatchSize: 10, Wait: time.Second, OnBatch: func(b localaws.BatchResult) {
				r.batches.Add(1)
				r.failed.Add(int64(b.Failed))
			}}
		goRun(func(ctx context.Context) { p.Run(ctx) })
	}
	sched := &localaws.Scheduler{Invoker: &localaws.RIE{URL: ctl.InvokeURL}, Period: c.tick, Clock: consume.WallClock{},
		OnInvocation: func(inv localaws.Invocation) {
			r.ticks.Add(1)
			if inv.Err != nil {
				r.tickErrs.Add(1)
				r.logf("tick error: %v", inv.Err)
			}
		}}
	goRun(func(ctx context.Context) { sched.Run(ctx) })
	pub := &cpupub.Publisher{CPU: sampler, API: cwmetric.NewClient(awsCfg, awsconf.Endpoint()), Instance: r.instance,
		Period: c.tick, Clock: consume.WallClock{}, OnDatapoint: func(cpupub.Datapoint) { r.published.Add(1) }}
	goRun(func(ctx context.Context) { pub.Run(ctx) })
	r.logf("up: table %s, database %s, controller and %d consumers (logs in %s)", r.table, r.dbName, c.consumers, logDir)
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
	admin, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(r.ctx, "CREATE DATABASE "+r.dbName); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", r.dbName, err)
	}
	if !r.cfg.keep {
		dropDSN := cfg.FormatDSN()
		r.onExit(func() {
			if db, err := sql.Open("mysql", dropDSN); err == nil {
				db.Exec("DROP DATABASE IF EXISTS " + r.dbName)
				db.Close()
			}
		})
	}
	cfg.DBName = r.dbName
	if r.db, err = sql.Open("mysql", cfg.FormatDSN()); err != nil {
		return "", nil, err
	}
	r.onExit(func() { r.db.Close() })
	if err := dbload.Install(r.ctx, r.db, dbload.Workload{DataRows: r.cfg.dataRows, ScanRows: r.cfg.scanRows}); err != nil {
		return "", nil, err
	}
	find := func() (int, error) { return listener(cfg.Addr) }
	pid, err := find()
	if err != nil {
		return "", nil, err
	}
	cores, err := cpupub.Cores(os.ReadFile, pid)
	if err != nil {
		return "", nil, err
	}
	r.res.Cores = cores
	r.logf("MariaDB pid %d (%g cores), database %s, %d rows scanned per message", pid, cores, r.dbName, r.cfg.scanRows)
	return cfg.FormatDSN(), &cpupub.Sampler{Read: os.ReadFile, PID: pid, Hz: cpupub.ClockTicks(os.ReadFile),
		Cores: cores, Now: time.Now, Find: find}, nil
}

var ssPID = regexp.MustCompile(`pid=(\d+)`)

// listener is the pid of the process listening on addr's port (the
// MariaDB server of the DSN, not another on this machine).
func listener(addr string) (int, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		port = "3306"
	}
	out, err := exec.Command("ss", "-Hltnp", "sport = :"+port).Output()
	if err != nil {
		return 0, fmt.Errorf("ss: %w", err)
	}
	m := ssPID.FindSubmatch(out)
	if m == nil {
		return cpupub.FindProcess(os.ReadFile, cpupub.PIDs(), "mariadbd")
	}
	return strconv.Atoi(string(m[1]))
}
