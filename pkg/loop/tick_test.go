package loop_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// fakeMetrics answers every query with the sample set for the query's
// DBInstanceIdentifier (or PromQL) and records its calls.
type fakeMetrics struct {
	mu      sync.Mutex
	samples map[string]metric.Sample
	live    map[string]liveMetric
	calls   [][]metric.Query
}

// liveMetric is a metric that publishes a datapoint every minute: its newest
// datapoint's period ended age before now.
type liveMetric struct {
	value float64
	age   time.Duration
}

func (f *fakeMetrics) set(key string, s metric.Sample) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.live, key)
	f.samples[key] = s
}

func (f *fakeMetrics) setLive(key string, m liveMetric) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.live == nil {
		f.live = map[string]liveMetric{}
	}
	f.live[key] = m
}

func (f *fakeMetrics) ReadMetrics(_ context.Context, qs []metric.Query, now time.Time) ([]metric.Sample, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, qs)
	out := make([]metric.Sample, len(qs))
	for i, q := range qs {
		k := q.Dimensions["DBInstanceIdentifier"]
		if q.Source == prommetric.Name {
			k = q.PromQL
		}
		named := q.Dimensions["QueueName"] != "" || q.Dimensions["FunctionName"] != ""
		if _, ok := f.live[q.Metric]; ok && named {
			k = q.Metric // a Lambda function's or an SQS queue's live metric, by its name
		}
		out[i] = f.samples[k]
		if s, ok := f.samples[q.Metric]; ok && named {
			out[i] = s // an SQS queue's metric, by its name
		}
		if m, ok := f.live[k]; ok {
			out[i] = metric.Sample{Value: m.value, Time: now.Add(-m.age - q.Period), Found: true}
		}
	}
	return out, nil
}

type rig struct {
	t       *testing.T
	store   *memstore.Store
	clock   *fakeClock
	metrics *fakeMetrics
	ticker  *loop.Ticker
}

func newRig(t *testing.T) *rig {
	r := &rig{
		t:       t,
		store:   memstore.New(),
		clock:   &fakeClock{now: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)},
		metrics: &fakeMetrics{samples: map[string]metric.Sample{}},
	}
	r.ticker = &loop.Ticker{Sources: looptest.Sources(), Store: r.store, Metrics: map[string]metric.Reader{cwmetric.Name: r.metrics}, Now: r.clock.Now}
	return r
}

func (r *rig) params(id string, edit func(a map[string]any)) {
	r.t.Helper()
	a := valid(func(a map[string]any) {
		a["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": id}
		a["slew_limit"] = 0.0
	})
	if edit != nil {
		edit(a)
	}
	if err := r.store.WriteParams(context.Background(), id, a); err != nil {
		r.t.Fatal(err)
	}
}

// cpu makes loop id's metric live at v, each datapoint published age after
// its period ended.
func (r *rig) cpu(id string, v float64, age time.Duration) {
	r.metrics.setLive(id, liveMetric{value: v, age: age})
}

// freeze stops loop id's metric: its newest datapoint stays the one of now.
func (r *rig) freeze(id string, v float64) {
	r.metrics.set(id, metric.Sample{Value: v, Time: r.clock.now.Add(-2 * time.Minute), Found: true})
}

// tick advances the clock by one minute, ticks, and returns loop id's report.
func (r *rig) tick(id string) loop.Report {
	r.t.Helper()
	r.clock.now = r.clock.now.Add(time.Minute)
	reports, err := r.ticker.Tick(context.Background())
	if err != nil {
		r.t.Fatalf("Tick: %v", err)
	}
	for _, rep := range reports {
		if rep.Loop == id {
			return rep
		}
	}
	r.t.Fatalf("no report for loop %s in %+v", id, reports)
	return loop.Report{}
}

func TestTickAppliesAndWritesRate(t *testing.T) {
	r := newRig(t)
	r.params("a", nil)
	r.cpu("a", 40, 90*time.Second)
	rep := r.tick("a")
	if rep.Outcome != loop.OutcomeApplied || !rep.RateWritten || rep.Tick != 1 || rep.ParamsStatus != loop.StatusApplied {
		t.Fatalf("first tick = %+v; want applied, rate written, tick 1, params applied", rep)
	}
	rate, err := r.store.ReadRate(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if rate.PerSecond != rep.Rate || !rate.WrittenAt.Equal(r.clock.now) || !rate.ExpiresAt.Equal(r.clock.now.Add(3*time.Minute)) || rate.Tick != 1 {
		t.Errorf("RATE = %+v; want rate %v written now, expiring in 3 ticks, tick 1", rate, rep.Rate)
	}
	// CPU 40 below the setpoint 70: the rate climbs tick after tick.
	prev := rep.Rate
	for i := range 3 {
		rep = r.tick("a")
		if rep.Rate <= prev {
			t.Errorf("tick %d: rate %v did not rise from %v with CPU below setpoint", i+2, rep.Rate, prev)
		}
		prev = rep.Rate
		if rep.ParamsStatus != "" {
			t.Errorf("tick %d: params status %q reported again for an unchanged item", i+2, rep.ParamsStatus)
		}
	}
	// CPU 95 above the setpoint: the rate falls.
	r.cpu("a", 95, 90*time.Second)
	if rep = r.tick("a"); rep.Rate >= prev {
		t.Errorf("rate %v did not fall from %v with CPU above setpoint", rep.Rate, prev)
	}
}

func TestTickDueWithLongPeriod(t *testing.T) {
	r := newRig(t)
	r.params("a", func(a map[string]any) { a["tick_period"] = "5m"; a["rate_ttl"] = "15m" })
	r.cpu("a", 50, time.Minute)
	var applied []int
	for i := range 11 { // the schedule fires every minute
		if rep := r.tick("a"); rep.Outcome == loop.OutcomeApplied {
			applied = append(applied, i)
		} else if rep.Outcome != loop.OutcomeNotDue {
			t.Fatalf("minute %d: outcome %s", i, rep.Outcome)
		}
	}
	if want := []int{0, 5, 10}; !slices.Equal(applied, want) {
		t.Errorf("a 5m loop ticked at minutes %v; want %v", applied, want)
	}
}

func TestTickNotDueForOverlappingInvocation(t *testing.T) {
	r := newRig(t)
	r.params("a", nil)
	r.cpu("a", 50, time.Minute)
	r.tick("a")
	r.clock.now = r.clock.now.Add(5 * time.Second) // a retried invocation
	reports, err := r.ticker.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if reports[0].Outcome != loop.OutcomeNotDue {
		t.Errorf("tick 5 s later = %+v; want not-due", reports[0])
	}
	if st, _ := r.store.ReadState(context.Background(), "a"); st.Version != 1 {
		t.Errorf("STATE version = %d after a not-due tick; want 1", st.Version)
	}
}

// barrierStore makes n concurrent ticks load the same STATE before any of
// them commits.
type barrierStore struct {
	*memstore.Store
	wg *sync.WaitGroup
}

func (b barrierStore) LoadLoops(ctx context.Context) ([]loop.Snapshot, error) {
	s, err := b.Store.LoadLoops(ctx)
	b.wg.Done()
	b.wg.Wait()
	return s, err
}

func TestTickConcurrentInvocationsOneWinner(t *testing.T) {
	r := newRig(t)
	for _, id := range []string{"a", "b", "c"} {
		r.params(id, nil)
		r.cpu(id, 50, time.Minute)
	}
	r.tick("a")
	r.clock.now = r.clock.now.Add(time.Minute)
	const n = 4
	var barrier sync.WaitGroup
	barrier.Add(n)
	results := make([][]loop.Report, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk := *r.ticker
			tk.Store = barrierStore{Store: r.store, wg: &barrier}
			rep, err := tk.Tick(context.Background())
			if err != nil {
				t.Error(err)
			}
			results[i] = rep
		}()
	}
	wg.Wait()
	for _, id := range []string{"a", "b", "c"} {
		applied, lost := 0, 0
		for _, reps := range results {
			for _, rep := range reps {
				if rep.Loop != id {
					continue
				}
				switch rep.Outcome {
				case loop.OutcomeApplied:
					applied++
				case loop.OutcomeLost:
					lost++
					if rep.RateWritten {
						t.Errorf("loop %s: a lost tick reports its rate written", id)
					}
				}
			}
		}
		if applied != 1 || lost != n-1 {
			t.Errorf("loop %s: %d applied, %d lost among %d concurrent ticks; want 1 and %d", id, applied, lost, n, n-1)
		}
		if st, _ := r.store.ReadState(context.Background(), id); st.Version != 2 {
			t.Errorf("loop %s: STATE version %d; want 2", id, st.Version)
		}
	}
}

func TestTickMetricsReadInOneBatch(t *testing.T) {
	r := newRig(t)
	prom := &fakeMetrics{samples: map[string]metric.Sample{}}
	r.ticker.Metrics[prommetric.Name] = prom
	for _, id := range []string{"a", "b", "c", "d"} {
		r.params(id, nil)
	}
	r.params("p", func(a map[string]any) {
		delete(a, "metric_dimensions")
		a["metric_source"], a["metric_promql"] = "prometheus", "max(cpu)"
	})
	r.tick("a")
	if len(r.metrics.calls) != 1 || len(r.metrics.calls[0]) != 4 {
		t.Errorf("cloudwatch reads = %d calls (%v); want 1 call with 4 queries", len(r.metrics.calls), r.metrics.calls)
	}
	if len(prom.calls) != 1 || len(prom.calls[0]) != 1 {
		t.Errorf("prometheus reads = %v; want 1 call with 1 query", prom.calls)
	}
	if q := r.metrics.calls[0][0]; q.Lookback != 6*time.Minute {
		t.Errorf("query lookback = %v; want stale_after + period = 6m", q.Lookback)
	}
}

func TestTickInvalidEditKeepsLastValid(t *testing.T) {
	r := newRig(t)
	r.params("a", nil)
	r.cpu("a", 50, time.Minute)
	r.tick("a")
	good := r.tick("a")

	r.params("a", func(a map[string]any) { a["kp"] = -3.0; a["setpoint"] = 150.0 })
	rep := r.tick("a")
	if rep.Outcome != loop.OutcomeApplied || rep.ParamsStatus != loop.StatusRefused {
		t.Fatalf("tick after invalid edit = %+v; want applied with params refused", rep)
	}
	status, err := r.store.ReadStatus(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if status.Status != loop.StatusRefused || status.Reason == "" || status.InForce == "" {
		t.Errorf("PARAMS_STATUS = %+v; want refused with a reason and what is in force", status)
	}
	for _, field := range []string{"kp", "setpoint"} {
		if !contains(status.Reason, field) {
			t.Errorf("reason %q does not name %s", status.Reason, field)
		}
	}
	if rep.Setpoint != 70 {
		t.Errorf("setpoint in force = %v; want the last valid 70", rep.Setpoint)
	}
	if rep.Rate <= good.Rate {
		t.Errorf("rate %v after the refused edit did not keep rising from %v under the last valid params", rep.Rate, good.Rate)
	}
	// The refusal is recorded once, not at every tick.
	if rep = r.tick("a"); rep.ParamsStatus != "" {
		t.Errorf("unchanged invalid item reported again: %+v", rep)
	}
	// A valid edit applies at the next tick.
	r.params("a", func(a map[string]any) { a["setpoint"] = 30.0 })
	if rep = r.tick("a"); rep.ParamsStatus != loop.StatusApplied || rep.Setpoint != 30 {
		t.Errorf("tick after valid edit = %+v; want applied with setpoint 30", rep)
	}
	if status, _ = r.store.ReadStatus(context.Background(), "a"); status.Status != loop.StatusApplied || status.Reason != "" {
		t.Errorf("PARAMS_STATUS after valid edit = %+v; want applied without reason", status)
	}
}

func TestTickInvalidFirstParamsDoNotRun(t *testing.T) {
	r := newRig(t)
	r.params("a", func(a map[string]any) { a["min_rate"] = 5000.0 })
	rep := r.tick("a")
	if rep.Outcome != loop.OutcomeNoParams || rep.RateWritten || rep.ParamsStatus != loop.StatusRefused {
		t.Errorf("tick = %+v; want no-params, no rate, refused", rep)
	}
	if _, err := r.store.ReadRate(context.Background(), "a"); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("RATE written for a loop without valid params: %v", err)
	}
	if st, err := r.store.ReadStatus(context.Background(), "a"); err != nil || st.Status != loop.StatusRefused || !contains(st.Reason, "min_rate") {
		t.Errorf("PARAMS_STATUS = %+v, %v; want refused naming min_rate", st, err)
	}
}

func TestTickShadowDoesNotWriteRate(t *testing.T) {
	r := newRig(t)
	r.params("a", func(a map[string]any) { a["mode"] = "shadow" })
	r.cpu("a", 50, time.Minute)
	rep := r.tick("a")
	if rep.Outcome != loop.OutcomeApplied || rep.RateWritten {
		t.Errorf("shadow tick = %+v; want applied without rate", rep)
	}
	if _, err := r.store.ReadRate(context.Background(), "a"); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("RATE in shadow mode: err = %v; want not found", err)
	}
	st, err := r.store.ReadState(context.Background(), "a")
	if err != nil || st.Rate != rep.Rate || st.Mode != loop.ModeShadow {
		t.Errorf("STATE = %+v, %v; want the shadow rate %v recorded", st, err, rep.Rate)
	}
}

func TestTickManualAndBackIsBumpless(t *testing.T) {
	r := newRig(t)
	r.params("a", nil)
	r.cpu("a", 70, time.Minute) // at setpoint: P = 0
	for range 3 {
		r.tick("a")
	}
	r.params("a", func(a map[string]any) { a["mode"] = "manual"; a["manual_rate"] = 400.0 })
	for range 2 {
		if rep := r.tick("a"); rep.Rate != 400 || rep.Mode != loop.ModeManual {
			t.Fatalf("manual tick = %+v; want rate 400", rep)
		}
	}
	r.params("a", nil)
	rep := r.tick("a")
	if rep.Mode != loop.ModeAuto || math.Abs(rep.Rate-400) > 1e-9 {
		t.Errorf("first auto tick after manual = %+v; want the rate to continue from 400 (at setpoint, no error)", rep)
	}
}

func TestTickStalePolicies(t *testing.T) {
	tests := []struct {
		policy string
		check  func(t *testing.T, before float64, rates []float64)
	}{
		{"hold", func(t *testing.T, before float64, rates []float64) {
			for i, v := range rates {
				if v != before {
					t.Errorf("stale tick %d: rate %v; want held at %v", i, v, before)
				}
			}
		}},
		{"decay", func(t *testing.T, before float64, rates []float64) {
			prev := before
			for i, v := range rates {
				if v >= prev || v < 50 {
					t.Errorf("stale tick %d: rate %v; want a decay from %v toward the safe rate 50", i, v, prev)
				}
				prev = v
			}
		}},
		{"fail-closed", func(t *testing.T, _ float64, rates []float64) {
			for i, v := range rates {
				if v != 10 {
					t.Errorf("stale tick %d: rate %v; want the minimum rate 10", i, v)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.policy, func(t *testing.T) {
			r := newRig(t)
			r.params("a", func(a map[string]any) {
				a["stale_policy"], a["safe_rate"], a["stale_decay"], a["stale_after"] = tt.policy, 50.0, "2m", "3m"
			})
			r.cpu("a", 40, time.Minute)
			var last loop.Report
			for range 4 {
				last = r.tick("a")
			}
			frozen := last.I
			// The newest datapoint stops moving: it becomes stale.
			r.freeze("a", 40)
			var rates []float64
			for i := range 4 {
				rep := r.tick("a")
				if i >= 3 && !rep.Stale { // age passes stale_after (3m) at the 3rd tick
					t.Fatalf("tick %d with a %v old datapoint not stale: %+v", i, rep.MetricAge, rep)
				}
				if rep.Stale {
					rates = append(rates, rep.Rate)
					if rep.I != frozen {
						t.Errorf("integrator moved while stale: %v -> %v", frozen, rep.I)
					}
				} else {
					frozen = rep.I
					last = rep
				}
			}
			if len(rates) == 0 {
				t.Fatal("no stale tick")
			}
			tt.check(t, last.Rate, rates)
			// Fresh data again: the resume continues from the last stale rate.
			r.cpu("a", 40, time.Minute)
			rep := r.tick("a")
			if !rep.Resumed || rep.Stale || rep.Rate != rates[len(rates)-1] {
				t.Errorf("resume tick = %+v; want resumed at %v", rep, rates[len(rates)-1])
			}
			if next := r.tick("a"); next.Rate <= rep.Rate {
				t.Errorf("after resume the rate %v did not rise from %v with CPU below setpoint", next.Rate, rep.Rate)
			}
		})
	}
}

func TestTickMissingMetric(t *testing.T) {
	r := newRig(t)
	r.params("a", func(a map[string]any) { a["stale_policy"] = "fail-closed" })
	rep := r.tick("a") // no datapoint at all
	if !rep.Stale || rep.Rate != 10 || !rep.RateWritten || !math.IsNaN(rep.Measured) {
		t.Errorf("tick without a metric = %+v; want stale, minimum rate 10 written, no measurement", rep)
	}
	r.metrics.set("a", metric.Sample{Value: math.NaN(), Time: r.clock.now, Found: true})
	if rep = r.tick("a"); !rep.Stale {
		t.Errorf("tick with a NaN datapoint = %+v; want stale", rep)
	}
	r.metrics.set("a", metric.Sample{Value: 250, Time: r.clock.now, Found: true})
	if rep = r.tick("a"); !rep.Stale {
		t.Errorf("tick with CPU 250 = %+v; want stale (out of range)", rep)
	}
}

func TestTickDisabledLoop(t *testing.T) {
	r := newRig(t)
	r.params("a", func(a map[string]any) { a["enabled"] = false })
	r.cpu("a", 50, time.Minute)
	if rep := r.tick("a"); rep.Outcome != loop.OutcomeDisabled || rep.RateWritten {
		t.Errorf("disabled tick = %+v; want disabled, no rate", rep)
	}
	if rep := r.tick("a"); rep.Outcome != loop.OutcomeDisabled {
		t.Errorf("second disabled tick = %+v; want disabled", rep)
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// corruptStore is a store one of whose loops has an item that does not
// decode.
type corruptStore struct {
	loop.TickStore
	bad string
}

func (s corruptStore) LoadLoops(ctx context.Context) ([]loop.Snapshot, error) {
	snaps, err := s.TickStore.LoadLoops(ctx)
	for i := range snaps {
		if snaps[i].Loop == s.bad {
			snaps[i].State, snaps[i].Err = nil, errors.New("decode STATE: attribute version: want a number")
		}
	}
	return snaps, err
}

// TestTickCorruptStateFailsItsLoopOnly: a loop whose STATE does not decode
// is reported failed with the reason, nothing is written for it, and the
// other loops tick.
func TestTickCorruptStateFailsItsLoopOnly(t *testing.T) {
	r := newRig(t)
	for _, id := range []string{"a", "b", "c"} {
		r.params(id, nil)
		r.cpu(id, 50, 30*time.Second)
	}
	r.ticker.Store = corruptStore{TickStore: r.store, bad: "b"}
	for range 2 {
		r.clock.now = r.clock.now.Add(time.Minute)
		reports, err := r.ticker.Tick(context.Background())
		if err != nil {
			t.Fatalf("Tick: %v", err)
		}
		for _, rep := range reports {
			want := loop.OutcomeApplied
			if rep.Loop == "b" {
				want = loop.OutcomeError
			}
			if rep.Outcome != want {
				t.Errorf("loop %s: outcome %s (%v); want %s", rep.Loop, rep.Outcome, rep.Err, want)
			}
		}
	}
	if _, err := r.store.ReadRate(context.Background(), "b"); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("RATE of the corrupt loop: err = %v; want not found (nothing written)", err)
	}
}

// A commit names its loop and advances STATE's version by exactly one.
func TestCommitValidate(t *testing.T) {
	tests := []struct {
		name string
		c    loop.Commit
		want string
	}{
		{"first version", loop.Commit{PrevVersion: 0, State: loop.State{Loop: "orders", Version: 1}}, ""},
		{"next version", loop.Commit{PrevVersion: 7, State: loop.State{Loop: "orders", Version: 8}}, ""},
		{"no loop", loop.Commit{PrevVersion: 0, State: loop.State{Version: 1}}, "commit names no loop: State.Loop must hold the loop id"},
		{"same version", loop.Commit{PrevVersion: 7, State: loop.State{Loop: "orders", Version: 7}}, `loop "orders": new version 7 does not follow 7`},
		{"skipped version", loop.Commit{PrevVersion: 7, State: loop.State{Loop: "orders", Version: 9}}, `loop "orders": new version 9 does not follow 7`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.c.Validate()
			if got := fmt.Sprint(err); (err == nil) != (tt.want == "") || err != nil && got != tt.want {
				t.Errorf("Validate() = %v; want %q", err, tt.want)
			}
			if errors.Is(err, loop.ErrConflict) {
				t.Errorf("Validate() = %v wraps ErrConflict; a malformed commit is not a conflict", err)
			}
		})
	}
}
