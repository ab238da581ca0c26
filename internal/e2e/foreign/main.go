// Command foreign is `make e2e-foreign`: a consumer Lambda without Sluice
// code (internal/e2e/foreign/consumer: aws-lambda-go and a MySQL driver)
// paced by the controller through its event source mapping alone.
//
// It uses the local stack as `make e2e` does (moto, ElasticMQ, MariaDB, the
// RIE; it starts what is not running and stops only that): a fresh
// database with the per-message workload (internal/dbload) and the orders
// table, the loops' table, a queue, and on moto the function and its
// mapping (localaws.CreateMapping). The consumer runs under the Lambda RIE
// behind `sluice local esm --mapping UUID --function NAME`, which follows
// the mapping's MaximumConcurrency and Enabled and puts the function's
// Duration and Invocations and the queue's NumberOfMessagesDeleted to
// CloudWatch as AWS does; the controller bootstrap ticks on MariaDB's CPU
// (internal/cpupub, as AWS/RDS CPUUtilization) with PARAMS esm_function and
// esm_queue, so it sizes the mapping from those figures. Producers keep a
// backlog. Phase one holds the setpoint above the floor (two instances);
// phase two lowers it below, where the mapping must be turned off and on.
// Then the queue is drained and every order checked stored exactly once.
//
// Its last line on stdout is one JSON object; it exits 1 when a check fails.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/e2e/verdict"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// Result is the JSON last line.
type Result struct {
	Setpoint           float64 `json:"setpoint"`
	MeanCPUAfterSettle float64 `json:"mean_cpu_after_settle"`
	Setpoint2          float64 `json:"setpoint2"`
	MeanCPU2           float64 `json:"mean_cpu_2"`
	Sent               int     `json:"sent"`
	Stored             int     `json:"stored"`
	Missing            int     `json:"missing"`
	Duplicates         int     `json:"duplicates"`
	MappingUpdates     int     `json:"mapping_updates"`
	MappingToggles     int     `json:"mapping_toggles"`
	MaxConcurrency     int     `json:"max_concurrency"`
	Ticks              int64   `json:"ticks"`
	verdict.Verdict
}

type config struct {
	e2ekit.Flags
	sluice               string
	setpoint, setpoint2  float64
	phase, settle        time.Duration
	workMS, rieInstances int
}

func main() {
	var c config
	c.Declare("foreign", 350_000, 400_000)
	flag.StringVar(&c.sluice, "sluice", "bin/e2e/sluice", "the sluice binary (sluice local esm)")
	flag.Float64Var(&c.setpoint, "setpoint", 30, "CPU setpoint of phase one, percent (above the floor)")
	flag.Float64Var(&c.setpoint2, "setpoint2", 12, "CPU setpoint of phase two, percent (below the floor: the mapping goes off and on)")
	flag.DurationVar(&c.phase, "phase", 35*time.Second, "length of each phase")
	flag.DurationVar(&c.settle, "settle", 15*time.Second, "the start of phase one left out of its mean")
	flag.IntVar(&c.workMS, "work-ms", 1000, "what each batch waits on the consumer's own slow dependency, ms")
	flag.IntVar(&c.rieInstances, "instances", 4, "consumer emulators (the most instances the mapping can run)")
	flag.Parse()
	r := &run{}
	os.Exit(r.Execute("e2e-foreign", c, 5*time.Minute, r.setup, r.scenario, &r.Res.Verdict))
}

type run struct {
	e2ekit.Harness[config, Result]

	id, table, loopID, instance, function string
	queueURL, uuid, dsn                   string
	db                                    *sql.DB
	sqs                                   *sqs.Client
	lambda                                *lambda.Client
	sampler                               *cpupub.Sampler
	orders                                e2ekit.Orders

	mu  sync.Mutex
	cpu []cpuPoint
}

type cpuPoint struct {
	t   time.Duration
	cpu float64
}

func (r *run) setup() error {
	e2ekit.SetDefaultEnv()
	c := r.Cfg
	r.id = fmt.Sprintf("%d", time.Now().Unix())
	r.table, r.loopID, r.instance, r.function = "sluice-e2e-foreign-"+r.id, "foreign", "sluice-foreign-"+r.id, "foreign-"+r.id
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return err
	}
	if err := r.StartStack(filepath.Join(c.LogDir, "stack-started-"+r.id), "moto", "mariadb", "rie"); err != nil {
		return err
	}
	rie, err := e2ekit.FindRIE(c.RIE, ".")
	if err != nil {
		return err
	}
	for _, b := range []string{c.Controller, c.Consumer, c.sluice} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s: %w (make e2e-foreign builds it)", b, err)
		}
	}
	if err := r.setupDatabase(); err != nil {
		return err
	}
	awsCfg, err := r.setupAWS()
	if err != nil {
		return err
	}
	params := r.params(c.setpoint)
	if err := params.Validate(looptest.Sources()); err != nil {
		return fmt.Errorf("PARAMS: %w", err)
	}
	if err := e2ekit.PutParams(r.Ctx, r.table, params); err != nil {
		return err
	}
	if err := r.startConsumers(rie); err != nil {
		return err
	}
	// The controller and its schedule (no Sluice consumer: Consumers 0).
	if err := r.StartFunctions(e2ekit.Functions{RIE: rie, Controller: c.Controller, LogDir: filepath.Join(c.LogDir, r.id),
		Env: []string{"SLUICE_TABLE=" + r.table, "AWS_LAMBDA_FUNCTION_TIMEOUT=60"}, Tick: c.Tick, SQS: r.sqs}); err != nil {
		return err
	}
	r.PublishCPU(awsCfg, r.sampler, r.instance, c.Tick, 0, nil)
	r.RecordCPU(r.sampler, func(at time.Time, u float64) {
		r.mu.Lock()
		r.cpu = append(r.cpu, cpuPoint{t: at.Sub(r.Start), cpu: u})
		r.mu.Unlock()
	}, nil)
	return nil
}

// setupDatabase creates the run's database with the workload and the
// orders table, and the sampler of MariaDB's CPU.
func (r *run) setupDatabase() error {
	c := r.Cfg
	var addr string
	var err error
	r.db, r.dsn, addr, err = r.OpenWorkloadDB("sluice_foreign_"+r.id, c.Keep, 0, dbload.Workload{DataRows: c.DataRows, ScanRows: c.ScanRows})
	if err != nil {
		return err
	}
	r.sampler, err = cpupub.NewSampler(0, func() (int, error) { return e2ekit.MariaDBPID(addr) }, 0)
	return err
}

// setupAWS creates the table, the queue, and on moto the function and its
// mapping (MaximumConcurrency 2).
func (r *run) setupAWS() (aws.Config, error) {
	awsCfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return awsCfg, err
	}
	r.sqs, r.lambda = sqs.NewFromConfig(awsCfg), lambda.NewFromConfig(awsCfg)
	if err := r.CreateTable(r.table, r.id, r.instance, r.Cfg.Keep); err != nil {
		return awsCfg, err
	}
	if r.queueURL, _, err = r.CreateQueue(r.sqs, r.function, map[string]string{"VisibilityTimeout": "60"}, r.Cfg.Keep); err != nil {
		return awsCfg, err
	}
	r.orders.API, r.orders.QueueURL = r.sqs, r.queueURL
	uuid, undo, err := localaws.CreateMapping(r.Ctx, awsconf.Endpoint(), r.lambda, r.function, 2)
	r.Defer(undo)
	r.uuid = uuid
	return awsCfg, err
}

// params are the loop's PARAMS at setpoint: a PI loop on the CPU with the
// feedforward of the documented MariaDB model (docs/lab.md), owning the
// foreign consumer's mapping.
func (r *run) params(setpoint float64) loop.Params {
	c := r.Cfg
	m := control.FOPDT{Gain: 1.38, Tau: 32 * time.Millisecond, DeadTime: 865 * time.Millisecond, Base: 1.6}
	return loop.Params{
		Loop: r.loopID, Enabled: true, Mode: loop.ModeAuto,
		Controls: loop.Controls{Setpoint: setpoint, Kp: 0.3 / m.Gain, Ki: 1 / (m.Gain * 10),
			AntiWindup: control.AntiWindupConditional, SetpointFilter: time.Second},
		Feedforward: &m,
		MinRate:     0, MaxRate: c.MaxRate, TickPeriod: c.Tick, RateTTL: 6 * c.Tick,
		Sensing: loop.Sensing{Metric: metric.Query{Source: cwmetric.Name, Namespace: cpupub.DefaultNamespace, Metric: cpupub.DefaultMetric,
			Dimensions: map[string]string{cpupub.DefaultDimension: r.instance}, Statistic: "Average", Period: c.Tick},
			Stale: control.StalePolicy{Action: control.StaleHold, SafeRate: 5}, StaleAfter: 6 * c.Tick},
		Mapping: &loop.MappingConfig{UUID: r.uuid, Kind: loop.MappingSQS, UpdateInterval: c.Tick, Min: loop.MinMappingConcurrency,
			Max: c.rieInstances, Function: r.function, Queue: localaws.QueueName(r.queueURL)},
	}
}

// startConsumers starts the foreign consumer under the emulators and
// `sluice local esm` in front of them, until the run ends.
func (r *run) startConsumers(rie string) error {
	c := r.Cfg
	var urls []string
	for i := range c.rieInstances {
		e, err := harness.StartRIE(r.Ctx, rie, c.Consumer, filepath.Join(c.LogDir, r.id), fmt.Sprintf("foreign-%d", i+1),
			[]string{"ORDERS_DSN=" + r.dsn, fmt.Sprintf("WORK_MS=%d", c.workMS), "AWS_LAMBDA_FUNCTION_TIMEOUT=60"})
		if err != nil {
			return err
		}
		r.Defer(e.Stop)
		urls = append(urls, strings.TrimSuffix(e.InvokeURL, localaws.InvokePath))
	}
	log, err := os.Create(filepath.Join(c.LogDir, r.id, "local-esm.log"))
	if err != nil {
		return err
	}
	r.Defer(func() { log.Close() })
	r.Go(func(ctx context.Context) {
		cmd := exec.CommandContext(ctx, c.sluice, "local", "esm", "--queue-url", r.queueURL, "--rie", strings.Join(urls, ","),
			"--mapping", r.uuid, "--function", r.function, "--every", "1s")
		cmd.Stdout, cmd.Stderr = log, log
		cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
		cmd.WaitDelay = 30 * time.Second
		if err := cmd.Run(); err != nil && ctx.Err() == nil {
			r.Fail("sluice local esm: %v", err)
		}
	})
	r.Logf("%d foreign consumer emulators behind sluice local esm --mapping %s", len(urls), r.uuid)
	return nil
}

func (r *run) scenario() error {
	c := r.Cfg
	r.Res.Setpoint, r.Res.Setpoint2 = c.setpoint, c.setpoint2
	stopProducers := r.Produce(&r.orders, 1, 40)
	watch := r.watchMapping()
	t0 := time.Since(r.Start)
	r.Sleep(c.phase)
	t1 := time.Since(r.Start)
	r.Res.MeanCPUAfterSettle = e2ekit.Round(r.meanCPU(t0+c.settle, t1), 1)
	r.Logf("phase one: mean CPU %.1f %% (setpoint %g)", r.Res.MeanCPUAfterSettle, c.setpoint)
	if err := e2ekit.SetParam(r.Ctx, r.table, r.loopID, "setpoint", fmt.Sprintf(`{"N":"%g"}`, c.setpoint2)); err != nil {
		return err
	}
	r.Sleep(c.phase)
	r.Res.MeanCPU2 = e2ekit.Round(r.meanCPU(t1+c.settle, time.Since(r.Start)), 1)
	stopProducers()
	if err := e2ekit.Manual(r.Ctx, r.table, r.loopID, c.MaxRate); err != nil {
		return err
	}
	drained := r.drain(60 * time.Second)
	watch()
	return r.check(drained)
}

// watchMapping reads the mapping every second and counts the changes of
// its MaximumConcurrency and its turns on after an off; the returned
// function stops it.
func (r *run) watchMapping() (stop func()) {
	ctx, cancel := context.WithCancel(r.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		cur, on := 2, true
		e2ekit.Every(ctx, time.Second, func() {
			out, err := r.lambda.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(r.uuid)})
			if err != nil {
				return
			}
			if out.ScalingConfig != nil && out.ScalingConfig.MaximumConcurrency != nil {
				if n := int(*out.ScalingConfig.MaximumConcurrency); n != cur {
					cur, r.Res.MappingUpdates = n, r.Res.MappingUpdates+1
					r.Res.MaxConcurrency = max(r.Res.MaxConcurrency, n)
				}
			}
			state := aws.ToString(out.State)
			if now := state == "Enabled" || state == "Updating"; now != on {
				on = now
				if on {
					r.Res.MappingToggles++
				}
				r.Logf("mapping %s", state)
			}
		})
	}()
	return func() { cancel(); <-done }
}

// drain waits until every order sent is stored.
func (r *run) drain(within time.Duration) bool {
	deadline := time.Now().Add(within)
	sent := int(r.orders.Sent.Load())
	for time.Now().Before(deadline) && r.Ctx.Err() == nil {
		var stored int
		if err := r.db.QueryRowContext(r.Ctx, "SELECT COUNT(*) FROM orders").Scan(&stored); err == nil && stored >= sent {
			return true
		}
		r.Sleep(time.Second)
	}
	return false
}

func (r *run) check(drained bool) error {
	c := r.Cfg
	var err error
	r.Res.Sent = int(r.orders.Sent.Load())
	r.Res.Stored, r.Res.Duplicates, r.Res.Missing, err = e2ekit.OrderCounts(r.Ctx, r.db, r.Res.Sent, nil)
	if err != nil {
		return err
	}
	r.Res.Ticks = r.Ticks.Load()
	if !drained || r.Res.Missing != 0 || r.Res.Duplicates != 0 {
		r.Fail("%d sent, %d stored, %d missing, %d duplicates (drained %v); want every order stored once", r.Res.Sent, r.Res.Stored, r.Res.Missing, r.Res.Duplicates, drained)
	}
	if d := math.Abs(r.Res.MeanCPUAfterSettle - c.setpoint); !(d <= 5) {
		r.Fail("mean CPU after settle %.1f %%; want within 5 points of the setpoint %g", r.Res.MeanCPUAfterSettle, c.setpoint)
	}
	if r.Res.MappingUpdates == 0 {
		r.Fail("the mapping's MaximumConcurrency never changed; want it sized from the function's figures")
	}
	if r.Res.MappingToggles == 0 {
		r.Fail("the mapping was never turned off and on again; want it below the floor of two instances (setpoint %g)", c.setpoint2)
	}
	return nil
}

// meanCPU is the mean CPU over [from, to) since the start (-1: no
// sample, which fails the check).
func (r *run) meanCPU(from, to time.Duration) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s float64
	n := 0
	for _, p := range r.cpu {
		if p.t >= from && p.t < to {
			s, n = s+p.cpu, n+1
		}
	}
	if n == 0 {
		return -1
	}
	return s / float64(n)
}
