// Command replica is `make e2e-replica`: the Sluice loop with two signals,
// the CPU of a MariaDB primary and the replication lag of its replica,
// against a real primary and replica on loopback.
//
// It starts moto, the SQS server and the Lambda RIE with
// localstack/stack/up.sh (stopping at the end what it started), and the
// private primary (127.0.0.1:3316) and replica (127.0.0.1:3317) with their
// Prometheus (127.0.0.1:9097) with localstack/stack/replica.sh: binary log
// in ROW format and GTID, single-threaded apply on the replica, whose CPU is
// capped (a cgroup CFS quota, or cpulimit). The consumers store orders in the primary; each
// order costs the primary CPU (internal/dbload's aggregate, which the
// replica never runs) and writes line items that the replica applies one
// transaction after the other.
//
// The harness measures the replica's lag pt-heartbeat style (heartbeat.go)
// and serves it to Prometheus; the primary's CPU is published as
// AWS/RDS CPUUtilization to CloudWatch (moto) by internal/cpupub, as in make
// e2e. Before the loop starts it measures the primary's write capacity and
// the replica's apply capacity. The loop's PARAMS name two signals: `cpu`
// (CloudWatch, the top-level attributes) with a setpoint above the CPU the
// replica lets the loop reach, and `lag` (Prometheus) with its own
// setpoint. Producers keep a backlog in the queue for the run; the run
// checks that the limiting signal (STATE's `limiting`) switches to `lag`
// and stays there, that the lag's mean after settling is within its band
// and that it is above the band for at most -max-above-share of the
// readings after settling, then drains the queue and checks that every order was stored exactly once
// in the primary and reached the replica.
//
// Its last line on stdout is one JSON object; it exits 1 when a check
// fails.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/e2e/verdict"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
)

// Result is the JSON last line.
type Result struct {
	LagSetpoint        float64 `json:"lag_setpoint"`
	LagBand            float64 `json:"lag_band"`
	MeanLagAfterSettle float64 `json:"mean_lag_after_settle"`
	MaxLagAfterSettle  float64 `json:"max_lag_after_settle"`
	MaxLag             float64 `json:"max_lag"`
	// SecondsAboveBand counts the 1-s lag readings after settling above
	// setpoint + band.
	SecondsAboveBand int `json:"seconds_above_band"`
	// ShareAboveBand is SecondsAboveBand over the readings after settling
	// (-1: none); the run fails above -max-above-share.
	ShareAboveBand     float64 `json:"share_above_band"`
	CPUSetpoint        float64 `json:"cpu_setpoint"`
	MeanCPUAfterSettle float64 `json:"mean_cpu_after_settle"`
	MaxCPUAfterSettle  float64 `json:"max_cpu_after_settle"`
	// LimitingSwitches counts the changes of STATE's limiting signal;
	// FirstLagLimitingS is when lag first limited, LagLimitingAtS when it
	// took over for good (the last switch to lag: it limits from there to
	// the end), LagLimitingShare the share of the readings since it first
	// limited where it did (-1: never).
	LimitingSwitches  int     `json:"limiting_switches"`
	FirstLagLimitingS float64 `json:"first_lag_limiting_s"`
	LagLimitingAtS    float64 `json:"lag_limiting_at_s"`
	LagLimitingShare  float64 `json:"lag_limiting_share"`
	MeanRateSettled   float64 `json:"mean_rate_after_settle"`
	Sent              int     `json:"sent"`
	Stored            int     `json:"stored"`
	ReplicaStored     int     `json:"replica_stored"`
	Missing           int     `json:"missing"`
	Duplicates        int     `json:"duplicates"`
	PrimaryCapacity   float64 `json:"primary_write_capacity"`
	ReplicaCapacity   float64 `json:"replica_apply_capacity"`
	// ReplicaSteadyCapacity is what the replica applied while the primary
	// took writes (-steady-test; 0 without): the tuning's.
	ReplicaSteadyCapacity float64 `json:"replica_apply_capacity_steady"`
	ReplicaUncapped       float64 `json:"replica_apply_capacity_uncapped"`
	ReplicaCPULimit       float64 `json:"replica_cpu_limit"`
	CPUGain               float64 `json:"cpu_gain"`
	Lines                 int     `json:"lines_per_order"`
	Ticks                 int     `json:"ticks"`
	TickErrors            int     `json:"tick_errors"`
	Gains                 gains   `json:"gains"`
	verdict.Verdict
}

type gains struct {
	CPUKp float64 `json:"cpu_kp"`
	CPUKi float64 `json:"cpu_ki"`
	LagKp float64 `json:"lag_kp"`
	LagKi float64 `json:"lag_ki"`
	LagKd float64 `json:"lag_kd"`
	// SlewLimit is PARAMS slew_limit: the largest rate increase per tick.
	SlewLimit float64 `json:"slew_limit"`
}

type config struct {
	e2ekit.Flags
	lagSetpoint, lagBand   float64
	maxAboveShare          float64
	cpuSetpoint, cpuAt     float64
	replicaCPU, slew, tauC float64
	lagKd, lagThetaExtra   float64
	lagDF, lagWindow       time.Duration
	lagAW                  string
	lagDrain               bool
	lines                  int
	duration, settle       time.Duration
	steadyTest             time.Duration
	root                   string
}

// declare declares the run's flags on the command line, with their defaults
// in c.
func (c *config) declare() {
	c.Declare("replica", 60_000, 100_000)
	flag.Float64Var(&c.lagSetpoint, "lag-setpoint", 8, "replica lag setpoint, seconds")
	flag.Float64Var(&c.lagBand, "lag-band", 2, "the lag's band around its setpoint, seconds: the mean after settling must be within it")
	flag.Float64Var(&c.maxAboveShare, "max-above-share", 0.1, "the largest share of the lag readings after settling above setpoint + band that passes")
	flag.Float64Var(&c.cpuSetpoint, "cpu-setpoint", 0, "primary CPU setpoint, percent of the machine (0: the CPU the capacity test's model gives at -cpu-at times the replica's capacity)")
	flag.Float64Var(&c.cpuAt, "cpu-at", 1.6, "with -cpu-setpoint 0: the rate, in replica capacities, at which the CPU's setpoint lies")
	flag.Float64Var(&c.slew, "slew", 0.05, "PARAMS slew_limit as a fraction of the replica's measured capacity per tick (0: none)")
	flag.Float64Var(&c.tauC, "lag-tau-c", 2, "the lag controller's SIMC closed-loop time tau_c, in units of its delay theta")
	flag.Float64Var(&c.lagKd, "lag-kd", 0, "the lag controller's kd as a fraction of the replica's measured capacity")
	flag.DurationVar(&c.lagDF, "lag-df", 0, "the lag controller's derivative_filter (the time constant of its derivative's first-order filter)")
	flag.Float64Var(&c.lagThetaExtra, "lag-theta-extra", 0, "seconds added to the lag controller's delay theta (tick + 2 s) for its SIMC gains; the lag's slope shows the rate the primary wrote a lag ago, so a lag at its setpoint adds that much dead time")
	flag.DurationVar(&c.lagWindow, "lag-window", 0, "the lag signal is the mean of the 1-s readings over this window (PromQL avg_over_time; 0: the newest reading)")
	flag.StringVar(&c.lagAW, "lag-anti-windup", "conditional", "the lag controller's anti_windup (conditional, back-calculation, none)")
	flag.BoolVar(&c.lagDrain, "lag-drain", true, "the lag signal measures the replica's pace and starts from it (PARAMS drain_feedforward)")
	flag.Float64Var(&c.replicaCPU, "replica-cpu", 5, "the replica's CPU cap, percent of one core (replica.sh cap)")
	flag.IntVar(&c.lines, "lines", 200, "line items per order (the rows the replica applies)")
	flag.DurationVar(&c.duration, "duration", 6*time.Minute, "how long the producers keep a backlog")
	flag.DurationVar(&c.steadyTest, "steady-test", 0, "how long a second capacity test writes at 1.5 times the first's measure while the replica applies (40s: as in docs/replica.md); its measure then tunes the loop (0: none, tune from the first)")
	flag.DurationVar(&c.settle, "settle", 45*time.Second, "settling time after lag first limits; the checks use what follows")
}

func main() {
	var c config
	c.declare()
	flag.Parse()
	c.root, _ = os.Getwd()
	r := &run{}
	os.Exit(r.Execute("e2e-replica", c, 15*time.Minute, r.setup, r.scenario, &r.Res.Verdict))
}

type run struct {
	e2ekit.Harness[config, Result]

	id, table, loopID, instance, dbName string
	queueURL, queueARN                  string
	primary, replica                    *sql.DB
	dsn                                 string
	ddb                                 *dynamodb.Client
	sqs                                 *sqs.Client
	sampler                             *cpupub.Sampler
	orders                              e2ekit.Orders

	mu       sync.Mutex
	cpu      []point // 1-s CPU of the primary
	lag      []point // 1-s heartbeat lag of the replica
	behind   []point // Seconds_Behind_Master at the same readings
	hbWrites []point // each heartbeat write on the primary: its start and duration (s)
	limiting []limitingPoint
	rate     []point
	ticks    []tickPoint
	// baseCPU is the primary's mean CPU before the capacity test.
	baseCPU float64
	// settledFor is how long the run lasted after settling.
	settledFor time.Duration
}

type point struct {
	t time.Duration
	v float64
}

type limitingPoint struct {
	t   time.Duration
	sig string
}

func (r *run) now() time.Duration { return time.Since(r.Start) }

// stack runs a localstack/stack script with the harness' output on stderr.
func (r *run) stack(script string, env []string, args ...string) error {
	cmd := exec.CommandContext(r.Ctx, "bash", append([]string{"localstack/stack/" + script}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("localstack/stack/%s %s: %w", script, strings.Join(args, " "), err)
	}
	return nil
}

// Ports of localstack/stack/replica.sh.
const (
	primaryAddr    = "127.0.0.1:3316"
	replicaAddr    = "127.0.0.1:3317"
	prometheusURL  = "http://127.0.0.1:9097"
	lagExporterAdr = "127.0.0.1:9318"
)

func (r *run) setup() error {
	e2ekit.SetDefaultEnv()
	c := r.Cfg
	r.id = fmt.Sprintf("%d", time.Now().Unix())
	r.table, r.loopID, r.instance = "sluice-e2e-replica-"+r.id, "e2e-replica", "sluice-e2e-replica-"+r.id
	r.dbName = "sluice_replica_" + r.id
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return err
	}
	if err := r.startStack(); err != nil {
		return err
	}
	if err := r.setupDatabases(); err != nil {
		return err
	}
	if err := r.measureCapacity(200); err != nil {
		return err
	}
	if err := r.setupAWS(); err != nil {
		return err
	}
	return r.startLoop()
}

// startStack starts moto, the SQS server, the RIE, and the primary/replica
// pair, each stopped at the end only if this run started it.
func (r *run) startStack() error {
	if err := r.StartStack(filepath.Join(r.Cfg.LogDir, "stack-started-"+r.id), "moto", "rie"); err != nil {
		return err
	}
	running := exec.Command("bash", "localstack/stack/replica.sh", "status").Run() == nil
	if err := r.stack("replica.sh", nil, "start"); err != nil {
		return err
	}
	if !running && !r.Cfg.Keep {
		r.Defer(func() {
			down := exec.Command("bash", "localstack/stack/replica.sh", "stop")
			down.Stdout, down.Stderr = os.Stderr, os.Stderr
			_ = down.Run()
		})
	}
	// The schema loads uncapped (the workload's data table replicates).
	if err := r.stack("replica.sh", nil, "uncap"); err != nil {
		return err
	}
	r.Defer(func() { exec.Command("bash", "localstack/stack/replica.sh", "uncap").Run() })
	return nil
}

// server is how the harness logs in to the MariaDB server at addr, no
// database named.
func server(addr string) *mysql.Config {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr = "sluice", "sluice", "tcp", addr
	cfg.ParseTime = true
	return cfg
}

// setupDatabases creates the run's database on the primary (it
// replicates), installs the workload and the orders, waits until the
// replica has it all, starts the heartbeat, the lag exporter and the CPU
// sampler.
func (r *run) setupDatabases() error {
	c := r.Cfg
	var err error
	if r.dsn, err = r.CreateDatabase(server(primaryAddr), r.dbName, c.Keep); err != nil {
		return fmt.Errorf("the primary: %w", err)
	}
	if r.primary, err = sql.Open("mysql", r.dsn); err != nil {
		return err
	}
	r.primary.SetMaxOpenConns(16)
	r.Defer(func() { r.primary.Close() })
	replicaDB := server(replicaAddr)
	replicaDB.DBName = r.dbName
	if r.replica, err = sql.Open("mysql", replicaDB.FormatDSN()); err != nil {
		return err
	}
	r.replica.SetMaxOpenConns(4)
	r.Defer(func() { r.replica.Close() })
	if err := dbload.Install(r.Ctx, r.primary, dbload.Workload{DataRows: c.DataRows, ScanRows: c.ScanRows}); err != nil {
		return err
	}
	if err := installOrders(r.Ctx, r.primary, c.lines); err != nil {
		return err
	}
	hb := &Heartbeat{Primary: r.primary, Period: 250 * time.Millisecond, OnWrite: func(start time.Time, took time.Duration) {
		r.mu.Lock()
		r.hbWrites = append(r.hbWrites, point{t: start.Sub(r.Start), v: took.Seconds()})
		r.mu.Unlock()
	}}
	r.Go(func(ctx context.Context) { hb.Run(ctx) })
	if err := r.waitCaughtUp(2*time.Minute, 2); err != nil {
		return fmt.Errorf("the replica did not load the schema: %w", err)
	}
	r.Logf("the replica has database %s", r.dbName)

	exp := &LagExporter{Period: time.Second, MaxAge: 3 * time.Second, Now: time.Now,
		Read: func(ctx context.Context) (LagReading, error) { return readLag(ctx, r.replica) },
		OnReading: func(at time.Time, l LagReading) {
			r.mu.Lock()
			r.lag = append(r.lag, point{t: at.Sub(r.Start), v: l.Lag})
			r.behind = append(r.behind, point{t: at.Sub(r.Start), v: l.BehindMaster})
			r.mu.Unlock()
		}}
	ln, err := net.Listen("tcp", lagExporterAdr)
	if err != nil {
		return fmt.Errorf("the lag exporter (Prometheus scrapes %s): %w", lagExporterAdr, err)
	}
	srv := &http.Server{Handler: exp}
	r.Go(func(ctx context.Context) { exp.Run(ctx) })
	r.Go(func(context.Context) { srv.Serve(ln) })
	r.Defer(func() { srv.Close() })

	_, port, _ := strings.Cut(primaryAddr, ":")
	pid, err := e2ekit.ListenerPID(port)
	if err != nil {
		return err
	}
	if r.sampler, err = cpupub.NewSampler(pid, nil, 0); err != nil {
		return err
	}
	r.RecordCPU(r.sampler, func(at time.Time, u float64) {
		r.mu.Lock()
		r.cpu = append(r.cpu, point{t: at.Sub(r.Start), v: u})
		r.mu.Unlock()
	}, nil)
	r.Logf("primary pid %d (%g cores), replica lag exported on %s", pid, r.sampler.Cores, lagExporterAdr)
	return nil
}

// waitCaughtUp waits until the heartbeat lag is below maxLag seconds.
func (r *run) waitCaughtUp(within time.Duration, maxLag float64) error {
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) && r.Ctx.Err() == nil {
		l, err := readLag(r.Ctx, r.replica)
		if err == nil && l.Lag < maxLag {
			return nil
		}
		if err != nil {
			last = err
		} else {
			last = fmt.Errorf("lag %.1f s", l.Lag)
		}
		r.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("still behind after %v: %v", within, last)
}

// measureCapacity measures, with n orders of negative ids written by as
// many connections as there are consumers in transactions of
// capacityBatch orders, the primary's write capacity
// (while the replica's SQL thread is stopped), the primary's CPU per
// order, then the replica's apply capacity: capped, and uncapped for
// comparison.
func (r *run) measureCapacity(n int) error {
	if err := r.stack("replica.sh", []string{fmt.Sprintf("SLUICE_REPLICA_CPU=%g", r.Cfg.replicaCPU)}, "cap"); err != nil {
		return err
	}
	r.Res.ReplicaCPULimit = r.Cfg.replicaCPU
	r.Sleep(3 * time.Second)
	r.mu.Lock()
	r.baseCPU, _ = stats(r.cpu, func(time.Duration) bool { return true })
	r.mu.Unlock()
	if math.IsNaN(r.baseCPU) {
		r.baseCPU = 0
	}
	var err error
	if r.Res.PrimaryCapacity, r.Res.ReplicaCapacity, err = r.capacityOnce(-1, n, true); err != nil {
		return err
	}
	if err := r.stack("replica.sh", nil, "uncap"); err != nil {
		return err
	}
	if _, r.Res.ReplicaUncapped, err = r.capacityOnce(-1-n, n, false); err != nil {
		return err
	}
	r.Res.PrimaryCapacity, r.Res.ReplicaCapacity, r.Res.ReplicaUncapped =
		round(r.Res.PrimaryCapacity), round(r.Res.ReplicaCapacity), round(r.Res.ReplicaUncapped)
	r.Logf("capacity: primary writes %.1f orders/s (%d connections); replica applies %.1f orders/s capped at %g %% of a core, %.1f uncapped; primary CPU %.3f points per order/s",
		r.Res.PrimaryCapacity, r.Cfg.Consumers, r.Res.ReplicaCapacity, r.Cfg.replicaCPU, r.Res.ReplicaUncapped, r.Res.CPUGain)
	if err := r.waitCaughtUp(time.Minute, 1); err != nil {
		return err
	}
	if err := r.stack("replica.sh", []string{fmt.Sprintf("SLUICE_REPLICA_CPU=%g", r.Cfg.replicaCPU)}, "cap"); err != nil {
		return err
	}
	if r.Cfg.steadyTest <= 0 {
		return nil
	}
	return r.capacityUnderWrites(-1-2*n, r.Cfg.steadyTest)
}

// capacityUnderWrites measures what the replica applies while the primary
// keeps taking writes, as in the loop: the capacity test's backlog, applied
// with the replication threads idle otherwise, overstates it 1.3 to 2 times
// (docs/replica.md). As many connections as consumers write transactions of
// capacityBatch orders (ids from first down) at 1.5 times the tested
// capacity for d; the replica's orders counted over the last two thirds of
// it, with the lag above 1 s at its start (a backlog to apply), give the
// capacity the loop is tuned from (Result.ReplicaSteadyCapacity).
func (r *run) capacityUnderWrites(first int, d time.Duration) error {
	rate := min(1.5*r.Res.ReplicaCapacity, 0.9*r.Res.PrimaryCapacity)
	ctx, stop := context.WithTimeout(r.Ctx, d)
	defer stop()
	var next atomic.Int64
	var wg sync.WaitGroup
	var werr atomic.Value
	every := time.Duration(float64(capacityBatch*r.Cfg.Consumers) / rate * float64(time.Second))
	for w := range r.Cfg.Consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(every)
			defer t.Stop()
			// The writers start spread over one period.
			if r.Sleep(every * time.Duration(w) / time.Duration(r.Cfg.Consumers)); ctx.Err() != nil {
				return
			}
			for {
				i := next.Add(capacityBatch) - capacityBatch
				if err := r.writeOrders(first-int(i), capacityBatch); err != nil && ctx.Err() == nil {
					werr.Store(err)
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	r.Sleep(d / 3)
	count := func() (int, time.Time, error) {
		var n int
		err := r.replica.QueryRowContext(r.Ctx, "SELECT COUNT(*) FROM orders WHERE order_id <= ?", first).Scan(&n)
		return n, time.Now(), err
	}
	n0, t0, err0 := count()
	lag0, errLag := readLag(r.Ctx, r.replica)
	<-ctx.Done()
	n1, t1, err1 := count()
	wg.Wait()
	if err := errors.Join(err0, errLag, err1); err != nil {
		return fmt.Errorf("steady capacity test: %w", err)
	}
	if err, ok := werr.Load().(error); ok {
		return fmt.Errorf("steady capacity test: %w", err)
	}
	if lag0.Lag < 1 {
		return fmt.Errorf("steady capacity test: the replica kept up with %.1f orders/s (lag %.2f s): no capacity to measure", rate, lag0.Lag)
	}
	r.Res.ReplicaSteadyCapacity = round(float64(n1-n0) / t1.Sub(t0).Seconds())
	r.Logf("steady capacity test: %d orders written at %.1f orders/s; the replica applied %.1f orders/s while the primary took writes (the backlog test: %.1f)",
		next.Load(), rate, r.Res.ReplicaSteadyCapacity, r.Res.ReplicaCapacity)
	return r.waitCaughtUp(3*time.Minute, 1)
}

// capacityOnce writes orders from first down to first-n+1 with the replica's
// SQL thread stopped, then restarts it and times the apply.
func (r *run) capacityOnce(first, n int, gain bool) (primary, replica float64, err error) {
	if _, err := r.replica.ExecContext(r.Ctx, "STOP SLAVE SQL_THREAD"); err != nil {
		return 0, 0, fmt.Errorf("stop the replica's SQL thread: %w", err)
	}
	restart := func() error {
		_, err := r.replica.ExecContext(context.WithoutCancel(r.Ctx), "START SLAVE SQL_THREAD")
		return err
	}
	s0, err := r.sampler.Sample()
	if err != nil {
		restart()
		return 0, 0, err
	}
	t0 := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	var werr atomic.Value
	for range r.Cfg.Consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(capacityBatch) - capacityBatch; i < int64(n); i = next.Add(capacityBatch) - capacityBatch {
				if err := r.writeOrders(first-int(i), min(capacityBatch, n-int(i))); err != nil {
					werr.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	wrote := time.Since(t0)
	s1, _ := r.sampler.Sample()
	if err, ok := werr.Load().(error); ok {
		restart()
		return 0, 0, fmt.Errorf("capacity test: %w", err)
	}
	if gain {
		if u, err := r.sampler.Utilization(s0, s1); err == nil {
			r.Res.CPUGain = round(u / (float64(n) / wrote.Seconds()))
		}
	}
	var before int
	if err := r.replica.QueryRowContext(r.Ctx, "SELECT COUNT(*) FROM orders WHERE order_id <= ? AND order_id > ?", first, first-n).Scan(&before); err != nil {
		restart()
		return 0, 0, err
	}
	t1 := time.Now()
	if err := restart(); err != nil {
		return 0, 0, fmt.Errorf("start the replica's SQL thread: %w", err)
	}
	for time.Since(t1) < 3*time.Minute && r.Ctx.Err() == nil {
		var got int
		if err := r.replica.QueryRowContext(r.Ctx, "SELECT COUNT(*) FROM orders WHERE order_id <= ? AND order_id > ?", first, first-n).Scan(&got); err == nil && got == n {
			return float64(n) / wrote.Seconds(), float64(n-before) / time.Since(t1).Seconds(), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, 0, fmt.Errorf("the replica did not apply the capacity test's %d orders in 3 minutes", n)
}

// capacityBatch is the orders per transaction of the capacity test: a full
// batch of the consumers (the event source mapping's batch size), whose
// sink stores a batch in one transaction.
const capacityBatch = 10

// writeOrders inserts the orders first, first-1, ... first-n+1 in one
// transaction.
func (r *run) writeOrders(first, n int) error {
	tx, err := r.primary.BeginTx(r.Ctx, nil)
	if err != nil {
		return err
	}
	for id := first; id > first-n; id-- {
		if _, err := tx.ExecContext(r.Ctx, "INSERT INTO orders (order_id, amount, msg_id) VALUES (?, ?, ?)", id, 1, fmt.Sprintf("cap%d", id)); err != nil {
			tx.Rollback()
			return err
		}
	}
	return tx.Commit()
}

// round keeps two decimals; NaN (no reading in the window) is -1, which
// JSON can carry.
func round(x float64) float64 {
	if math.IsNaN(x) {
		return -1
	}
	return e2ekit.Round(x, 2)
}

// setupAWS creates the table (the project's init script, its default loop
// disabled) and the queue.
func (r *run) setupAWS() error {
	awsCfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return err
	}
	r.ddb = dynamodb.NewFromConfig(awsCfg)
	r.sqs = sqs.NewFromConfig(awsCfg)
	if err := r.CreateTable(r.table, r.id, r.instance, r.Cfg.Keep); err != nil {
		return err
	}
	r.queueURL, r.queueARN, err = r.CreateQueue(r.sqs, "sluice-e2e-replica-"+r.id, map[string]string{"VisibilityTimeout": "60"}, r.Cfg.Keep)
	r.orders.API, r.orders.QueueURL = r.sqs, r.queueURL
	return err
}

// startLoop writes PARAMS and starts the controller and consumer
// bootstraps under the RIE, the schedule, the event source mappings and
// the CPU publisher.
func (r *run) startLoop() error {
	c := r.Cfg
	if err := r.putParams(); err != nil {
		return err
	}
	rie, err := e2ekit.FindRIE(c.RIE, c.root)
	if err != nil {
		return err
	}
	awsCfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return err
	}
	err = r.StartFunctions(e2ekit.Functions{RIE: rie, Controller: c.Controller, Consumer: c.Consumer, LogDir: filepath.Join(c.LogDir, r.id),
		Env:           []string{"SLUICE_TABLE=" + r.table, "AWS_LAMBDA_FUNCTION_TIMEOUT=60"},
		ControllerEnv: []string{"SLUICE_PROMETHEUS_URL=" + prometheusURL},
		ConsumerEnv: []string{"SLUICE_LOOP=" + r.loopID, "SLUICE_SINK=mysql", "SLUICE_MYSQL_DSN=" + r.dsn,
			"SLUICE_MYSQL_STATEMENT=" + e2ekit.OrdersStatement, "SLUICE_SAFE_RATE=3", "SLUICE_RATE_PERIOD=1s"},
		Consumers: c.Consumers, Tick: c.Tick, SQS: r.sqs, QueueURL: r.queueURL, QueueARN: r.queueARN, Region: awsCfg.Region,
	})
	if err != nil {
		return err
	}
	r.PublishCPU(awsCfg, r.sampler, r.instance, c.Tick, 0, nil)
	r.Go(r.recordState)
	return nil
}

// recordState reads STATE's limiting signal and RATE every second.
func (r *run) recordState(ctx context.Context) {
	e2ekit.Every(ctx, time.Second, func() {
		st, err := e2ekit.Item(r.Ctx, r.ddb, r.table, r.loopID, "STATE")
		if err != nil {
			return
		}
		rate, _ := e2ekit.Item(r.Ctx, r.ddb, r.table, r.loopID, "RATE")
		r.mu.Lock()
		defer r.mu.Unlock()
		if v, ok := st["limiting"].(*ddbtypes.AttributeValueMemberS); ok {
			r.limiting = append(r.limiting, limitingPoint{t: r.now(), sig: v.Value})
			r.recordTick(st, v.Value)
		}
		if v, ok := rate["rate"].(*ddbtypes.AttributeValueMemberN); ok {
			var x float64
			fmt.Sscan(v.Value, &x)
			r.rate = append(r.rate, point{t: r.now(), v: x})
		}
	})
}
