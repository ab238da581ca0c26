package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/e2e/verdict"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// Result is the JSON last line.
type Result struct {
	// LiveGains are the hand-picked gains the live loop ran on.
	LiveGains struct {
		Kp float64 `json:"kp"`
		Ki float64 `json:"ki"`
	} `json:"live_gains"`
	// Events are the excitations, in seconds since the start of the run.
	Events []string `json:"events"`
	// Tune is the JSON of `sluice tune --from-history --loop LIVE --json`
	// (model, confidence, excitation_ok, reason, kp, ki, params).
	Tune       json.RawMessage `json:"tune"`
	TuneStatus int             `json:"tune_exit_status"`
	// TuneFile is the same on the same points exported to a history file
	// (historyfile.go); ProposalFrom says which proposal the shadow runs
	// ("" when both refused).
	TuneFile       json.RawMessage `json:"tune_file"`
	TuneFileStatus int             `json:"tune_file_exit_status"`
	ProposalFrom   string          `json:"proposal_from"`
	// ShadowTicks are the shadow loop's HIST points; ShadowReport the JSON
	// of `sluice tune --shadow-report` on the table over the shadow phase,
	// ShadowReportFile over the whole run's history in history files
	// (null when refused or there was no proposal);
	// ShadowReportError says why.
	ShadowTicks       int             `json:"shadow_ticks"`
	ShadowReport      json.RawMessage `json:"shadow_report"`
	ShadowReportFile  json.RawMessage `json:"shadow_report_file"`
	ShadowReportError string          `json:"shadow_report_error,omitempty"`
	// Phases: the measured CPU (the HIST items' datapoints) per phase.
	Phases []phase `json:"phases"`

	Sent       int     `json:"sent"`
	Stored     int     `json:"stored"`
	Duplicates int     `json:"duplicates"`
	Missing    int     `json:"missing"`
	Ticks      int     `json:"ticks"`
	TickErrors int     `json:"tick_errors"`
	Batches    int64   `json:"batches"`
	BatchFails int64   `json:"batch_item_failures"`
	Datapoints int64   `json:"cpu_datapoints"`
	Cores      float64 `json:"cores"`
	verdict.Verdict
}

// phase is what the live loop's history shows over one phase.
type phase struct {
	Name         string  `json:"name"`
	Setpoint     float64 `json:"setpoint"`
	MeanCPU      float64 `json:"mean_cpu"`
	SDCPU        float64 `json:"sd_cpu"`
	MeanConsumed float64 `json:"mean_consumed"`
	Ticks        int     `json:"ticks"`
}

// liveParams are the live loop's PARAMS: the hand-picked gains, the sample
// PARAMS' conditional anti-windup and a setpoint filter of two ticks (the
// sample's 2 minutes at its 1-minute tick), no model.
func (r *run) liveParams() loop.Params {
	c := r.Cfg
	r.Res.LiveGains.Kp, r.Res.LiveGains.Ki = c.kp, c.ki
	return loop.Params{
		Loop: r.live, Enabled: true, Mode: loop.ModeAuto,
		Controls: loop.Controls{Setpoint: c.setpoints[0], Kp: c.kp, Ki: c.ki,
			AntiWindup: control.AntiWindupConditional, SetpointFilter: 2 * c.Tick},
		MinRate: 3, MaxRate: c.MaxRate, TickPeriod: c.Tick, RateTTL: 6 * c.Tick,
		Sensing: loop.Sensing{Metric: metric.Query{Source: cwmetric.Name, Namespace: cpupub.DefaultNamespace, Metric: cpupub.DefaultMetric,
			Dimensions: map[string]string{cpupub.DefaultDimension: r.instance}, Statistic: "Average", Period: c.Tick},
			Stale: control.StalePolicy{Action: control.StaleHold, SafeRate: 5}, StaleAfter: 6 * c.Tick},
	}
}

func (r *run) event(format string, a ...any) {
	e := fmt.Sprintf("%.0fs: %s", r.since(), fmt.Sprintf(format, a...))
	r.Res.Events = append(r.Res.Events, e)
	r.Logf("%s", e)
}

func (r *run) since() float64 { return time.Since(r.Start).Seconds() }

// scenario is the run after the setup: live phase, proposal, shadow phase,
// shadow report, drain and checks.
func (r *run) scenario() error {
	c := r.Cfg
	prod := r.producers()
	defer prod.stop()

	// 1. Live, hand-picked gains: start-up, a setpoint edit, the producers
	// stopping (the queue drains, the consumers idle) and a burst.
	liveFrom := time.Now()
	p := c.live / 6
	prod.start()
	r.event("live loop on kp %g, ki %g; producers on, setpoint %g", c.kp, c.ki, c.setpoints[0])
	r.Sleep(p)
	r.setSetpoint(r.live, c.setpoints[1])
	r.Sleep(2 * p)
	// The burst: a phase's worth of what the consumers took at the new
	// setpoint, so that it drains within the run on a loaded machine.
	took := r.consumed(time.Now().Add(-p))
	prod.stop()
	r.event("producers stopped: the queue drains and idles")
	r.Sleep(3 * p / 2)
	n := max(50, int(took*p.Seconds()))
	r.event("burst: %d messages at once (the consumers took %.1f msg/s before the stop)", n, took)
	r.send(n)
	r.Sleep(3 * p / 2)
	r.phases(liveFrom, "live")

	// 2. The proposal from the loop's history: its HIST items as the table
	// holds them, then the same points in a history file.
	prop, err := r.propose(liveFrom)
	if err != nil {
		return err
	}

	// 3. The shadow beside the live loop: another edit, an outside load.
	shadowFrom := time.Now()
	prod.start()
	if prop.Params != nil {
		if err := r.writeShadow(prop.Params); err != nil {
			return err
		}
	}
	r.Sleep(c.shadow / 3)
	r.setSetpoint(r.live, c.setpoints[2])
	if prop.Params != nil {
		r.setSetpoint(r.shadow, c.setpoints[2])
	}
	r.Sleep(c.shadow / 3)
	if err := r.outsideLoad(c.shadow / 3); err != nil {
		return err
	}
	r.phases(shadowFrom, "shadow")

	// 4. The shadow report.
	since := time.Since(shadowFrom).Round(time.Second)
	if prop.Params != nil {
		r.shadowReport(liveFrom, since)
	} else {
		r.Res.ShadowReportError = "no proposal to shadow: " + prop.Reason
	}

	// 5. Drain in manual mode at max_rate and count.
	prod.stop()
	return r.drainAndCount()
}

// proposal is what the scenario reads of `tune --from-history --json`.
type proposal struct {
	ExcitationOK bool           `json:"excitation_ok"`
	Reason       string         `json:"reason"`
	Params       map[string]any `json:"params"`
}

// propose runs `sluice tune --from-history` on the live loop's HIST items,
// then on the same history exported to a history file, and returns the first proposal (Params nil when both refused).
func (r *run) propose(from time.Time) (proposal, error) {
	var props [2]proposal
	r.event("sluice tune --from-history --loop %s", r.live)
	r.Res.Tune, r.Res.TuneStatus = r.sluice("tune", "--from-history", "--loop", r.live, "--metric-delay", "0s", "--json")
	file := filepath.Join(r.Cfg.LogDir, "history-"+r.id+".json")
	if err := r.export(r.live, file, from); err != nil {
		return proposal{}, err
	}
	r.event("sluice tune --from-history --history-file %s", file)
	r.Res.TuneFile, r.Res.TuneFileStatus = r.sluice("tune", "--from-history", "--history-file", file, "--json")
	for i, out := range []json.RawMessage{r.Res.Tune, r.Res.TuneFile} {
		if err := json.Unmarshal(out, &props[i]); err != nil {
			return proposal{}, fmt.Errorf("tune --from-history: no JSON report: %v", err)
		}
		if props[i].ExcitationOK && props[i].Params != nil {
			r.Res.ProposalFrom = []string{"table", "history file"}[i]
			return props[i], nil
		}
		r.event("tune refused: %s", props[i].Reason)
	}
	return props[1], nil
}

// setSetpoint edits one loop's setpoint in its PARAMS.
func (r *run) setSetpoint(loopID string, sp float64) {
	attrs, err := r.store.ReadParams(r.Ctx, loopID)
	if err == nil {
		attrs[loop.AttrSetpoint] = sp
		err = r.store.WriteParams(r.Ctx, loopID, attrs)
	}
	if err != nil {
		r.Fail("edit the setpoint of %s: %v", loopID, err)
		return
	}
	r.event("setpoint of %s -> %g", loopID, sp)
}

// writeShadow creates the shadow loop: the live loop's PARAMS (its metric,
// bounds and setpoint), mode shadow, the proposal's parameters.
func (r *run) writeShadow(proposal map[string]any) error {
	attrs, err := r.store.ReadParams(r.Ctx, r.live)
	if err != nil {
		return fmt.Errorf("read the live PARAMS: %w", err)
	}
	for k, v := range proposal {
		attrs[k] = v
	}
	attrs[loop.AttrMode] = string(loop.ModeShadow)
	if _, err := loop.DecodeParams(r.shadow, attrs, looptest.Sources()); err != nil {
		return fmt.Errorf("the shadow's PARAMS: %w", err)
	}
	if err := r.store.WriteParams(r.Ctx, r.shadow, attrs); err != nil {
		return fmt.Errorf("write the shadow's PARAMS: %w", err)
	}
	r.event("shadow loop %s: mode shadow, the proposal (kp %v, ki %v)", r.shadow, proposal["kp"], proposal["ki"])
	return nil
}

// outsideLoad runs the workload's load generator for d, about 8 points of
// CPU from outside the loop: an unmeasured disturbance.
func (r *run) outsideLoad(d time.Duration) error {
	gen := &dbload.LoadGenerator{DB: r.db, Rate: 6, ScanRows: r.Cfg.ScanRows, DataRows: r.Cfg.DataRows, Workers: 2}
	if err := gen.Start(r.Ctx); err != nil {
		return err
	}
	r.event("outside load on: %g aggregate queries/s for %v", gen.Rate, d)
	r.Sleep(d)
	gen.Stop()
	done, failed := gen.Queries()
	r.event("outside load off: %d queries (%d failed)", done, failed)
	return nil
}

// shadowReport runs `sluice tune --shadow-report` as an operator would,
// on the table over the shadow phase (the proving period), then on the
// whole run's history in history files.
func (r *run) shadowReport(start time.Time, since time.Duration) {
	hist, err := r.history(r.shadow, time.Time{})
	r.Res.ShadowTicks = len(hist)
	if err != nil || len(hist) == 0 {
		r.Fail("the shadow loop recorded no history (%v)", err)
	}
	liveFile := filepath.Join(r.Cfg.LogDir, "history-"+r.id+"-all.json")
	shadowFile := filepath.Join(r.Cfg.LogDir, "history-"+r.id+"-shadow.json")
	for _, f := range []struct {
		loop, path string
	}{{r.live, liveFile}, {r.shadow, shadowFile}} {
		if err := r.export(f.loop, f.path, start); err != nil {
			r.Fail("%v", err)
			return
		}
	}
	for _, s := range []struct {
		args []string
		out  *json.RawMessage
	}{
		{[]string{"--loop", r.live, "--shadow", r.shadow, "--metric-delay", "0s", "--since", since.String()}, &r.Res.ShadowReport},
		{[]string{"--history-file", liveFile, "--shadow-file", shadowFile}, &r.Res.ShadowReportFile},
	} {
		args := append([]string{"tune", "--shadow-report", "--json"}, s.args...)
		r.event("sluice %s", strings.Join(args, " "))
		out, status := r.sluice(args...)
		*s.out = out
		if status != 0 || out == nil {
			r.Res.ShadowReportError += fmt.Sprintf("%s: exit %d: %s; ", s.args[0], status, lastLine(r.lastStderr))
		}
	}
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}

// sluice runs the sluice command against this run's table and returns its
// stdout and exit status; its stderr goes to ours and to lastStderr.
func (r *run) sluice(args ...string) (json.RawMessage, int) {
	cmd := exec.CommandContext(r.Ctx, r.Cfg.sluice, args...)
	cmd.Env = append(os.Environ(), "SLUICE_TABLE="+r.table)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	os.Stderr.Write(stderr.Bytes())
	r.lastStderr = stderr.String()
	status := 0
	if err != nil {
		status = -1
		if ee, ok := err.(*exec.ExitError); ok {
			status = ee.ExitCode()
		}
	}
	out := bytes.TrimSpace(stdout.Bytes())
	if !json.Valid(out) {
		out = nil
	}
	return out, status
}

// backlog is the queue depth the producers keep: two full batches for
// every consumer, so the rate is the loop's, and a queue that drains in
// a few ticks when they stop (an idle phase that is idle).
const backlog = 120

// producers keep a backlog of messages in the queue while started.
type producers struct {
	r      *run
	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func (r *run) producers() *producers { return &producers{r: r} }

func (p *producers) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		return
	}
	ctx, cancel := context.WithCancel(p.r.Ctx)
	p.cancel = cancel
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for ctx.Err() == nil {
			if n := backlog - p.r.depth(ctx); n > 0 {
				p.r.send(n)
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
}

func (p *producers) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cancel != nil {
		p.cancel()
		p.wg.Wait()
		p.cancel = nil
	}
}

// depth is the number of messages in the queue, visible or in flight (a
// large number when SQS does not answer, so that nobody sends).
func (r *run) depth(ctx context.Context) int {
	out, err := r.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(r.queueURL),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		return math.MaxInt32
	}
	var visible, inFlight int
	fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], &visible)
	fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], &inFlight)
	return visible + inFlight
}

// send sends n messages {"seq": N} with the next sequence numbers, ten at a
// time, retrying what SQS did not take.
func (r *run) send(n int) {
	for ; n > 0; n -= 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for range min(n, 10) {
			seq := r.sent.Add(1) - 1
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(seq)), MessageBody: aws.String(fmt.Sprintf(`{"seq":%d}`, seq))})
		}
		if err := e2ekit.SendEntries(context.WithoutCancel(r.Ctx), r.sqs, r.queueURL, entries); err != nil {
			r.Fail("%v", err)
			return
		}
	}
}
