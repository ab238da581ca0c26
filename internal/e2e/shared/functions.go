package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/tuning"
)

// documentedModel is MariaDB on this project's 2-core machine with the
// default workload, as `make e2e` measures it (docs/lab.md): the run has no
// time for a step test, the controller's feedback corrects the rest.
var documentedModel = control.FOPDT{Gain: 1.38, Tau: 32 * time.Millisecond, DeadTime: 865 * time.Millisecond, Base: 1.6}

// writeParams writes the destination's PARAMS (the lab's pi-aw-spf-ff
// tuned on the documented model, as `make e2e` tunes on its step test) and
// each member's (destination, weight, its own rate bounds), as an operator
// would with the aws CLI.
func (r *run) writeParams() error {
	c := r.Cfg
	m := documentedModel
	s := sim.Scenario{Plant: m, MetricPeriod: c.Tick, MetricDelay: c.Tick, Tick: c.Tick, Setpoint: c.setpoint, MaxRate: c.MaxRate}
	loopModel := tuning.LoopModel(m, s.PipelineDelay())
	g, err := tuning.Tune(loopModel, tuning.SIMC, tuning.Options{Form: tuning.PI})
	if err != nil {
		return fmt.Errorf("tune: %w", err)
	}
	tc := lab.IntegralTime(s, lab.Plant{Model: m})
	p := loop.Params{
		Loop: r.destID, Enabled: true, Mode: loop.ModeAuto,
		Controls: loop.Controls{Setpoint: c.setpoint, Kp: g.Kp, Ki: 1 / (m.Gain * tc.Seconds()),
			AntiWindup: control.AntiWindupConditional, SetpointFilter: max(time.Second, lab.SetpointFilter(loopModel).Round(time.Second)),
			DelayAware: true},
		Feedforward: &m,
		MinRate:     3, MaxRate: c.MaxRate, TickPeriod: c.Tick, RateTTL: 6 * c.Tick,
		Sensing: loop.Sensing{Metric: metric.Query{Source: cwmetric.Name, Namespace: cpupub.DefaultNamespace, Metric: cpupub.DefaultMetric,
			Dimensions: map[string]string{cpupub.DefaultDimension: r.instance}, Statistic: "Average", Period: c.Tick},
			Stale: control.StalePolicy{Action: control.StaleHold, SafeRate: 5}, StaleAfter: 6 * c.Tick},
	}
	if err := p.Validate(looptest.Sources()); err != nil {
		return fmt.Errorf("the destination's PARAMS: %w", err)
	}
	if err := e2ekit.PutParams(r.Ctx, r.table, p); err != nil {
		return err
	}
	r.Logf("destination %s: setpoint %g %%, kp %.3g, ki %.3g; members %s (weight %g), %s (weight %g)", r.destID, c.setpoint, p.Kp, p.Ki,
		r.members[0].loop, r.members[0].weight, r.members[1].loop, r.members[1].weight)
	for _, mb := range r.members {
		attrs := map[string]any{loop.AttrDestination: r.destID, loop.AttrWeight: mb.weight, "min_rate": 0.0, "max_rate": c.MaxRate}
		if err := putAttrs(r.Ctx, r.table, mb.loop, attrs); err != nil {
			return err
		}
	}
	return nil
}

// putAttrs writes loopID's PARAMS item of attrs with the aws CLI.
func putAttrs(ctx context.Context, table, loopID string, attrs map[string]any) error {
	item := map[string]any{"pk": map[string]string{"S": loopID}, "sk": map[string]string{"S": "PARAMS"}}
	for k, v := range attrs {
		item[k] = e2ekit.DDBJSON(v)
	}
	b, err := json.Marshal(item)
	if err != nil {
		return err
	}
	return e2ekit.AWS(ctx, "dynamodb", "put-item", "--table-name", table, "--item", string(b))
}

// startFunctions starts the controller under the emulator with its
// schedule, and each member's consumers (SLUICE_LOOP its loop id) with an
// event source mapping poller on its queue.
func (r *run) startFunctions(rie string, awsCfg aws.Config) error {
	c := r.Cfg
	logDir := filepath.Join(c.LogDir, r.id)
	env := []string{"SLUICE_TABLE=" + r.table, "AWS_LAMBDA_FUNCTION_TIMEOUT=60"}
	ctl, err := harness.StartRIE(r.Ctx, rie, c.Controller, logDir, "controller", env)
	if err != nil {
		return err
	}
	r.Defer(ctl.Stop)
	for _, m := range r.members {
		for i := range c.Consumers {
			cenv := append(append([]string{}, env...), "SLUICE_LOOP="+m.loop, "SLUICE_SINK=mysql", "SLUICE_MYSQL_DSN="+r.dsn,
				"SLUICE_MYSQL_STATEMENT="+e2ekit.OrdersStatement, "SLUICE_SAFE_RATE=2", "SLUICE_RATE_PERIOD=1s",
				fmt.Sprintf("SLUICE_CONSUMERS=%d", c.Consumers))
			ce, err := harness.StartRIE(r.Ctx, rie, c.Consumer, logDir, fmt.Sprintf("%s-consumer-%d", m.loop, i+1), cenv)
			if err != nil {
				return err
			}
			r.Defer(ce.Stop)
			p := &localaws.Poller{API: r.sqs, Invoker: &localaws.RIE{URL: ce.InvokeURL}, QueueURL: m.queueURL, QueueARN: m.queueARN,
				Region: awsCfg.Region, BatchSize: 2, Wait: time.Second}
			r.Go(func(ctx context.Context) { p.Run(ctx) })
		}
	}
	sched := &localaws.Scheduler{Invoker: &localaws.RIE{URL: ctl.InvokeURL}, Period: c.Tick, Clock: consume.WallClock{},
		OnInvocation: func(inv localaws.Invocation) {
			r.Ticks.Add(1)
			if inv.Err != nil {
				r.TickErrors.Add(1)
				r.Logf("tick error: %v", inv.Err)
			}
		}}
	r.Go(func(ctx context.Context) { sched.Run(ctx) })
	r.Logf("emulators up: the controller and %d consumers per member (logs in %s)", c.Consumers, logDir)
	return nil
}

// recordCPU starts the CPU publisher (the destination's signal) and the
// 1-s CPU record the checks use.
func (r *run) recordCPU(awsCfg aws.Config) {
	r.PublishCPU(awsCfg, r.sampler, r.instance, r.Cfg.Tick, 0, nil)
	r.RecordCPU(r.sampler, func(at time.Time, u float64) {
		r.mu.Lock()
		r.cpu = append(r.cpu, cpuPoint{t: at.Sub(r.Start), cpu: u})
		r.mu.Unlock()
	}, func(gap time.Duration) {
		r.stalls.Add(1)
		r.Logf("stall: this process was not scheduled for %v (machine overloaded?)", gap.Round(time.Millisecond))
	})
}
