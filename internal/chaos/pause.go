package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// The rate-zero-30m scenario: an operator's pause (PARAMS paused, as
// `sluice pause` writes it) played through the controller's own tick
// (loop.Ticker, every pauseTick), which writes RATE 0 and turns the
// stand-in event source mapping off; then the resume. On the Lambda paths
// the run counts what the mapping received from pauseGrace after the pause
// was written until the resume: it must be 0.

// pauseTick is the tick period of the paused loop; pauseGrace is how long
// after the pause is written a receive still counts as in flight (the
// controller's tick, one long poll and the batch in flight).
const (
	pauseTick  = 10 * time.Second
	pauseGrace = 5 * time.Second
)

// pauseFor is how long a pause or an outage lasts: d at full size, 10 s
// in the short runs of `make test` (the full runs show the length).
func (s Size) pauseFor(d time.Duration) time.Duration {
	if s.Scale >= 1 {
		return d
	}
	return 10 * time.Second
}

// standIn is the stand-in mapping's Enabled, as the controller's tick sets
// it (loop.MappingSwitch); its concurrency is not scaled here.
type standIn struct {
	off atomic.Bool
	win pauseWindow
	// received counts what the mapping received inside win.
	received atomic.Int64
	// fn is the function under the emulator (nil until it runs); invoking
	// is held by each invocation, the mapping's and the controller's
	// probes (outage.go): an emulator runs one at a time.
	fn       atomic.Pointer[localaws.RIE]
	invoking sync.Mutex
	// receives are the messages' receive counts.
	receives receiveCounts
}

// function is the function the mapping invokes (nil before it runs).
func (s *standIn) function() *localaws.RIE { return s.fn.Load() }

var _ loop.MappingSwitch = (*standIn)(nil)

func (s *standIn) MaximumConcurrency(context.Context, string) (int, error)  { return 0, nil }
func (s *standIn) SetMaximumConcurrency(context.Context, string, int) error { return nil }
func (s *standIn) SetMappingEnabled(_ context.Context, _ string, on bool) error {
	s.off.Store(!on)
	return nil
}

// enabled is the mapping's State as the stand-in pollers read it.
func (s *standIn) enabled(context.Context) (bool, error) { return !s.off.Load(), nil }

// count records n messages received now.
func (s *standIn) count(n int) {
	if s.win.contains(time.Now()) {
		s.received.Add(int64(n))
	}
}

// pauseWindow is when nothing may be received: from the pause written plus
// pauseGrace until the resume (unix ns; 0: not set).
type pauseWindow struct{ from, to atomic.Int64 }

func (w *pauseWindow) contains(t time.Time) bool {
	from, to := w.from.Load(), w.to.Load()
	return from != 0 && t.UnixNano() >= from && (to == 0 || t.UnixNano() < to)
}

// pauseStore is the loop's table: the controller's and the operator's.
type pauseStore interface {
	loop.TickStore
	WriteParams(ctx context.Context, loopID string, attrs map[string]any) error
}

// pausePlan is one pause: the loop, its table, the rate before and after
// it, the mapping (kind sqs or kafka; sw nil: a worker, no mapping) and
// what leaves RATE at rate for the rest of the run once the controller is
// gone.
type pausePlan struct {
	store   pauseStore
	setRate func(ctx context.Context, perSecond float64) error
	id      string
	rate    float64
	kind    string
	sw      *standIn
}

// operatorPause pauses the plan's loop for d through the controller's
// tick, then resumes it and leaves RATE at the plan's rate.
func operatorPause(ctx context.Context, pl pausePlan, d time.Duration) ([]string, error) {
	store, id, rate, sw := pl.store, pl.id, pl.rate, pl.sw
	params := map[string]any{"mode": "manual", "manual_rate": rate, "min_rate": 0.0, "max_rate": max(rate, 1) * 10,
		"setpoint": 70.0, "kp": 1.0, "metric_dimensions": map[string]any{"DBInstanceIdentifier": id},
		"tick_period": pauseTick.String(), "rate_ttl": (6 * pauseTick).String()}
	ticker := &loop.Ticker{Store: store, Sources: metricsources.All(), Now: time.Now}
	if sw != nil {
		params["esm_uuid"], params["esm_kind"] = "chaos-"+id, pl.kind
		ticker.Mappings = sw
	}
	paused := maps.Clone(params)
	paused[loop.AttrPaused] = true
	if err := store.WriteParams(ctx, id, paused); err != nil {
		return nil, fmt.Errorf("pause: %w", err)
	}
	start := time.Now()
	if sw != nil {
		sw.win.from.Store(start.Add(pauseGrace).UnixNano())
	}
	for time.Since(start) < d {
		if err := pausedTick(ctx, ticker, id); err != nil {
			return nil, err
		}
		if err := sleep(ctx, min(pauseTick, d-time.Since(start))); err != nil {
			return nil, err
		}
	}
	if err := store.WriteParams(ctx, id, params); err != nil {
		return nil, fmt.Errorf("resume: %w", err)
	}
	if sw != nil {
		sw.win.to.Store(time.Now().UnixNano())
	}
	if _, err := ticker.Tick(ctx); err != nil {
		return nil, fmt.Errorf("resume tick: %w", err)
	}
	// The rest of the run has no controller: a RATE that outlives it.
	err := pl.setRate(ctx, rate)
	return []string{fmt.Sprintf("paused (sluice pause, the controller's tick) for %v", d.Round(time.Second))}, err
}

// pausedTick runs one controller tick and checks that it paused loop id.
func pausedTick(ctx context.Context, ticker *loop.Ticker, id string) error {
	reports, err := ticker.Tick(ctx)
	if err != nil {
		return fmt.Errorf("paused tick: %w", err)
	}
	for _, r := range reports {
		if r.Loop != id || r.Outcome == loop.OutcomeNotDue {
			continue
		}
		if !r.Paused || r.Outcome != loop.OutcomeApplied || (r.Mapping != nil && r.Mapping.Err != "") {
			return fmt.Errorf("paused tick of %s: outcome %s, paused %v, mapping %+v, %v", id, r.Outcome, r.Paused, r.Mapping, r.Err)
		}
	}
	return nil
}

// pauseResult records what the mapping received during the pause, and
// fails the run when it received anything.
func pauseResult(sw *standIn, r *Result) {
	if sw == nil || sw.win.from.Load() == 0 {
		return
	}
	if r.Extra == nil {
		r.Extra = map[string]any{}
	}
	n := sw.received.Load()
	r.Extra["received_while_paused"] = n
	if n > 0 && r.Error == "" {
		r.Error = fmt.Sprintf("the mapping received %d messages while the loop was paused", n)
	}
}

// operatorPauseFault is the pause on an SQS path, once rows messages are
// stored: the loop's table is the stack's, the mapping the Lambda path's
// stand-in (none for the worker).
func operatorPauseFault(rows int, d time.Duration) func(context.Context, *Run) ([]string, error) {
	return func(ctx context.Context, r *Run) ([]string, error) {
		if err := until(ctx, func() bool { return len(r.Dest.Stored()) >= rows }); err != nil {
			return nil, err
		}
		pl := pausePlan{store: ddbloop.New(r.Stack.DDB, r.Stack.Table), setRate: r.SetRate, id: r.Stack.Loop, rate: 100}
		if r.Worker == nil {
			pl.kind, pl.sw = string(loop.MappingSQS), r.sw
		}
		return operatorPause(ctx, pl, d)
	}
}

// pause pauses the Kafka run's loop once rows records are stored, for
// sc.Pause: the worker reads RATE from k.loops, the Lambda path's mapping
// is k.sw.
func (k *kafkaRun) pause(ctx context.Context, rows int, sc KafkaScenario) error {
	if err := until(ctx, func() bool { return len(k.stored(ctx)) >= rows }); err != nil {
		return err
	}
	pl := pausePlan{store: k.loops, id: "chaos", rate: sc.Rate, setRate: func(ctx context.Context, perSecond float64) error {
		now := time.Now()
		return k.loops.WriteRate(ctx, protocol.Rate{Loop: "chaos", PerSecond: perSecond, WrittenAt: now, ExpiresAt: now.Add(24 * time.Hour)})
	}}
	if sc.Lambda != nil {
		pl.kind, pl.sw = string(loop.MappingKafka), k.sw
	}
	faults, err := operatorPause(ctx, pl, sc.Pause)
	k.faults = append(k.faults, faults...)
	return err
}

// countingInvoker counts the records of the invocations that start while
// the loop is paused.
type countingInvoker struct {
	inner localaws.Invoker
	sw    *standIn
	// hits counts the invocations that ran to the function's deadline
	// (kafkaFunctionTimeout); nil: not counted.
	hits *atomic.Int64
}

func (c countingInvoker) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var ev events.KafkaEvent
	if json.Unmarshal(payload, &ev) == nil {
		n := 0
		for _, recs := range ev.Records {
			n += len(recs)
		}
		c.sw.count(n)
	}
	start := time.Now()
	out, err := c.inner.Invoke(ctx, payload)
	if c.hits != nil && (time.Since(start) >= kafkaFunctionTimeout-100*time.Millisecond || (err != nil && strings.Contains(err.Error(), "timed out"))) {
		c.hits.Add(1)
	}
	return out, err
}
