package e2ekit

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// Functions are the controller and the SQS consumer bootstraps under the
// Lambda RIE, with the stand-ins that drive them as AWS would: the
// EventBridge schedule of the controller and one event source mapping
// poller per consumer.
type Functions struct {
	// RIE, Controller and Consumer are the binaries; LogDir their logs.
	RIE, Controller, Consumer, LogDir string
	// Env is both functions' environment, ControllerEnv and ConsumerEnv
	// what only one of them gets.
	Env, ControllerEnv, ConsumerEnv []string
	Consumers                       int
	Tick                            time.Duration
	SQS                             localaws.SQSAPI
	QueueURL, QueueARN, Region      string
	// OnBatch sees every consumer batch (may be nil). The run counts the
	// controller's invocations (Run.Ticks) and logs their errors.
	OnBatch func(localaws.BatchResult)
}

// StartFunctions starts f's emulators and stand-ins until the run ends (or
// it stops them at its end).
func (r *Run) StartFunctions(f Functions) error {
	ctl, err := harness.StartRIE(r.Ctx, f.RIE, f.Controller, f.LogDir, "controller", append(f.Env, f.ControllerEnv...))
	if err != nil {
		return err
	}
	r.Defer(ctl.Stop)
	var consumers []*harness.RIE
	for i := range f.Consumers {
		ce, err := harness.StartRIE(r.Ctx, f.RIE, f.Consumer, f.LogDir, fmt.Sprintf("consumer-%d", i+1),
			append(append(append([]string{}, f.Env...), f.ConsumerEnv...), fmt.Sprintf("SLUICE_CONSUMERS=%d", f.Consumers)))
		if err != nil {
			return err
		}
		r.Defer(ce.Stop)
		consumers = append(consumers, ce)
	}
	r.Logf("emulators up: controller and %d consumers (logs in %s)", len(consumers), filepath.Clean(f.LogDir))
	sched := &localaws.Scheduler{Invoker: &localaws.RIE{URL: ctl.InvokeURL}, Period: f.Tick, Clock: consume.WallClock{},
		OnInvocation: func(inv localaws.Invocation) {
			r.Ticks.Add(1)
			if inv.Err != nil {
				r.TickErrors.Add(1)
				r.Logf("tick error: %v", inv.Err)
			}
		}}
	r.Go(func(ctx context.Context) { sched.Run(ctx) })
	for _, ce := range consumers {
		p := &localaws.Poller{API: f.SQS, Invoker: &localaws.RIE{URL: ce.InvokeURL}, QueueURL: f.QueueURL, QueueARN: f.QueueARN,
			Region: f.Region, BatchSize: 10, Wait: time.Second, OnBatch: f.OnBatch}
		r.Go(func(ctx context.Context) { p.Run(ctx) })
	}
	return nil
}

// Flags are the flags every harness has: the bootstraps and the RIE, the
// loop's tick and max_rate, the consumers, the workload's size, -keep and
// -log-dir.
type Flags struct {
	Controller, Consumer, RIE string
	Tick                      time.Duration
	MaxRate                   float64
	Consumers                 int
	ScanRows, DataRows        int
	Keep                      bool
	LogDir                    string
}

// Declare declares f's flags on the command line: the workload scans
// scanRows of dataRows rows per message by default, and the emulators log
// in .cache/e2e/<name> (make e2e-bootstraps builds the two bootstraps).
func (f *Flags) Declare(name string, scanRows, dataRows int) {
	flag.StringVar(&f.Controller, "controller", "bin/e2e/controller/bootstrap", "controller bootstrap (host arch)")
	flag.StringVar(&f.Consumer, "consumer", "bin/e2e/sqs-consumer/bootstrap", "SQS consumer bootstrap (host arch)")
	flag.StringVar(&f.RIE, "rie", "", "aws-lambda-rie (default $SLUICE_RIE_BIN, .cache/bin/aws-lambda-rie, PATH)")
	flag.DurationVar(&f.Tick, "tick", 5*time.Second, "controller tick and CPU metric period (a CloudWatch period: 1s, 5s, 10s, ...)")
	flag.Float64Var(&f.MaxRate, "max-rate", 60, "max_rate of the loops, messages/s")
	flag.IntVar(&f.Consumers, "consumers", 6, "consumer emulators (the mapping's maximum concurrency)")
	flag.IntVar(&f.ScanRows, "scan-rows", scanRows, "rows each message's aggregate reads in the database (its CPU cost)")
	flag.IntVar(&f.DataRows, "data-rows", dataRows, "rows of the workload's data table")
	flag.BoolVar(&f.Keep, "keep", false, "keep what the run created for inspection: database, table, queues (and a primary/replica pair it started)")
	flag.StringVar(&f.LogDir, "log-dir", ".cache/e2e/"+name, "logs of the emulators")
}
