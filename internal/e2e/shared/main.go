// Command shared is `make e2e-shared`: several queues into one database on
// this machine's real plant. Two SQS queues (ElasticMQ) feed one MariaDB
// through the real SQS consumer bootstraps under the Lambda RIE, each
// queue's consumers on the loop id of a member (weights 2:1) of one
// destination loop, whose controller ticks on MariaDB's CPU (published by
// internal/cpupub as AWS/RDS CPUUtilization, as in `make e2e`) and splits
// its rate among the members by weighted max-min fair share by demand.
//
// Phases: both queues backlogged (settle for -phase and until two ticks in a
// row find neither member limited by demand, then measure for -measure:
// the CPU within -band points of its setpoint, each member's stored count
// within 10 % of its weighted share); the first member's weight edited from
// 2 to 1 (followed at the destination's next tick: the members' rates 1:1);
// the second queue's producers stop and its queue empties (its share taken
// by the other: the first member's rate at least 95 % of what the idle one
// leaves of the destination's);
// then every message is checked stored exactly once. Its last line on
// stdout is one JSON object; it exits 1 when a check fails.
package main

import (
	"database/sql"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/e2e/verdict"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
)

// Result is the JSON last line.
type Result struct {
	Setpoint float64 `json:"setpoint"`
	// MeanCPU is MariaDB's mean CPU while both queues were backlogged,
	// after settling; MaxCPU the highest 1-s CPU of the run.
	MeanCPU float64 `json:"mean_cpu_both_backlogged"`
	MaxCPU  float64 `json:"max_cpu"`
	// Members are the two queues' figures.
	Members [2]MemberResult `json:"members"`
	// ShareErrorMax is the larger |stored share - weighted share| /
	// weighted share of the two members while both were backlogged.
	ShareErrorMax float64 `json:"share_error_max"`
	// IdleTakenShare is the first member's rate over what the second, idle,
	// took less of the destination's rate, at the ticks while the second
	// queue was idle (the least of them).
	IdleTakenShare float64 `json:"idle_taken_share"`
	// WeightEditFollowed: the first tick of the members after the weight
	// edit carried the new weight and rates 1:1 (within 10 %);
	// WeightEditRatio is that tick's first:second rate.
	WeightEditFollowed bool    `json:"weight_edit_followed"`
	WeightEditRatio    float64 `json:"weight_edit_ratio"`
	Sent               int     `json:"sent"`
	Stored             int     `json:"stored"`
	Missing            int     `json:"missing"`
	Duplicates         int     `json:"duplicates"`
	Ticks              int     `json:"ticks"`
	TickErrors         int     `json:"tick_errors"`
	Stalls             int64   `json:"stalls"`
	Cores              float64 `json:"cores"`
	verdict.Verdict
}

// MemberResult is one member's figures.
type MemberResult struct {
	Loop   string  `json:"loop"`
	Weight float64 `json:"weight"`
	// StoredBoth is what it stored while both queues were backlogged,
	// WeightedShare its weight's part of both members' total there.
	StoredBoth    int     `json:"stored_both_backlogged"`
	WeightedShare float64 `json:"weighted_share"`
	Sent          int     `json:"sent"`
	Stored        int     `json:"stored"`
}

type config struct {
	e2ekit.Flags
	setpoint, band float64
	phase, measure time.Duration
	backlog        int
	root           string
}

func main() {
	var c config
	c.Declare("shared", 350_000, 400_000)
	_ = flag.CommandLine.Lookup("consumers").Value.Set("2") // per member: two queues on two cores
	flag.Float64Var(&c.setpoint, "setpoint", 20, "the destination's CPU setpoint, percent")
	flag.Float64Var(&c.band, "band", 5, "how far from the setpoint, points, the mean CPU may be once settled")
	flag.DurationVar(&c.phase, "phase", 15*time.Second, "length of the settling and of the idle phase")
	flag.DurationVar(&c.measure, "measure", 20*time.Second, "how long both queues' stored counts are measured, after settling")
	flag.IntVar(&c.backlog, "backlog", 40, "messages each producer keeps queued (small: a stopped queue empties at once)")
	flag.Parse()
	c.root, _ = os.Getwd()
	r := &run{}
	os.Exit(r.Execute("e2e-shared", c, 10*time.Minute, r.setup, r.scenario, &r.Res.Verdict))
}

// member is one queue and its loop.
type member struct {
	loop     string
	weight   float64
	queueURL string
	queueARN string
	orders   e2ekit.Orders
}

type run struct {
	e2ekit.Harness[config, Result]

	id       string
	table    string
	destID   string
	instance string
	members  [2]*member
	db       *sql.DB
	dsn      string
	ddb      *dynamodb.Client
	sqs      *sqs.Client
	store    *ddbloop.Store
	sampler  *cpupub.Sampler

	mu     sync.Mutex
	cpu    []cpuPoint
	stalls atomic.Int64
}

type cpuPoint struct {
	t   time.Duration
	cpu float64
}

func (r *run) setup() error {
	e2ekit.SetDefaultEnv()
	c := r.Cfg
	r.id = fmt.Sprintf("%d", time.Now().Unix())
	r.table, r.destID, r.instance = "sluice-e2e-shared-"+r.id, "shared-db", "sluice-e2e-shared-"+r.id
	r.members = [2]*member{{loop: "shared-a", weight: 2}, {loop: "shared-b", weight: 1, orders: e2ekit.Orders{Offset: 10_000_000}}}
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return err
	}
	if err := r.StartStack(filepath.Join(c.LogDir, "stack-started-"+r.id), "moto", "mariadb", "rie"); err != nil {
		return err
	}
	rie, err := e2ekit.FindRIE(c.RIE, c.root)
	if err != nil {
		return err
	}
	for _, b := range []string{c.Controller, c.Consumer} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("bootstrap %s: %w (make e2e-bootstraps builds it)", b, err)
		}
	}
	if err := r.setupDatabase(); err != nil {
		return err
	}
	awsCfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return err
	}
	if err := r.setupAWS(awsCfg); err != nil {
		return err
	}
	if err := r.writeParams(); err != nil {
		return err
	}
	if err := r.startFunctions(rie, awsCfg); err != nil {
		return err
	}
	r.recordCPU(awsCfg)
	return nil
}

// setupDatabase creates the run's database with the workload and the
// orders table both queues' consumers write, and finds MariaDB's process.
func (r *run) setupDatabase() error {
	c := r.Cfg
	var addr string
	var err error
	r.db, r.dsn, addr, err = r.OpenWorkloadDB("sluice_e2e_shared_"+r.id, c.Keep, 8, dbload.Workload{DataRows: c.DataRows, ScanRows: c.ScanRows})
	if err != nil {
		return err
	}
	pid := func() (int, error) { return e2ekit.MariaDBPID(addr) }
	if r.sampler, err = cpupub.NewSampler(0, pid, 0); err != nil {
		return err
	}
	r.Res.Cores = r.sampler.Cores
	r.Logf("MariaDB pid %d, %g cores", r.sampler.PID, r.sampler.Cores)
	return nil
}

// setupAWS makes the clients, the table and a queue per member.
func (r *run) setupAWS(awsCfg aws.Config) error {
	r.ddb = dynamodb.NewFromConfig(awsCfg)
	r.sqs = sqs.NewFromConfig(awsCfg)
	r.store = ddbloop.New(r.ddb, r.table)
	if err := r.CreateTable(r.table, r.id, r.instance, r.Cfg.Keep); err != nil {
		return err
	}
	for _, m := range r.members {
		var err error
		m.queueURL, m.queueARN, err = r.CreateQueue(r.sqs, "sluice-e2e-"+m.loop+"-"+r.id, map[string]string{"VisibilityTimeout": "60"}, r.Cfg.Keep)
		if err != nil {
			return err
		}
		m.orders.API, m.orders.QueueURL = r.sqs, m.queueURL
	}
	return nil
}

func (r *run) now() time.Duration { return time.Since(r.Start) }

func (r *run) sleepUntil(t time.Duration) { r.Sleep(t - r.now()) }

// meanCPU is the mean CPU over [from, to) since the start.
func (r *run) meanCPU(from, to time.Duration) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s float64
	n := 0
	for _, p := range r.cpu {
		if p.t >= from && p.t < to {
			s += p.cpu
			n++
		}
	}
	if n == 0 {
		return math.NaN()
	}
	return s / float64(n)
}

func (r *run) maxCPU() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := 0.0
	for _, p := range r.cpu {
		m = max(m, p.cpu)
	}
	return m
}
