package storetest

import (
	"context"
	"errors"
	"math"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/balance"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/drift"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Store is every method of a loop store: what the controller, the CLI and
// the dashboard use.
type Store interface {
	RateStore
	loop.TickStore
	ReadParams(ctx context.Context, loopID string) (map[string]any, error)
	WriteParams(ctx context.Context, loopID string, attrs map[string]any) error
	WriteParamsIf(ctx context.Context, loopID string, attrs map[string]any, read int64) error
	ReadState(ctx context.Context, loopID string) (loop.State, error)
	ReadStatus(ctx context.Context, loopID string) (loop.ParamsStatus, error)
}

// SampleParams returns valid parameters for loop id.
func SampleParams(id string) loop.Params {
	p, err := loop.DecodeParams(id, map[string]any{
		"setpoint": 70.0, "kp": 2.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 1000.0,
		"slew_limit": 100.0, "tick_period": "1m", "stale_policy": "decay", "safe_rate": 50.0,
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": "db-" + id},
		"ff_gain":           0.05, "ff_base": 10.0, "ff_tau": "15s", "ff_dead_time": "5s",
	}, looptest.Sources())
	if err != nil {
		panic(err) // a bug in the sample, not in the store
	}
	return p
}

// contractTime is the time the contract's items are written at.
func contractTime() time.Time { return time.Date(2026, 11, 29, 23, 0, 0, 5000, time.UTC) }

// TestTickStore runs the contract of the items a controller tick reads and
// writes against a fresh store from newStore.
func TestTickStore(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("params round trip", func(t *testing.T) { testParamsRoundTrip(t, newStore(t)) })
	t.Run("conditional params edits", func(t *testing.T) { testParamsIf(t, newStore(t)) })
	t.Run("load loops", func(t *testing.T) { testLoadLoops(t, newStore(t)) })
	t.Run("commit round trip", func(t *testing.T) { testCommitRoundTrip(t, newStore(t)) })
	t.Run("conditional on version", func(t *testing.T) { testConditionalOnVersion(t, newStore(t)) })
	t.Run("one winner among concurrent commits", func(t *testing.T) { testOneWinnerAmongConcurrentCommits(t, newStore(t)) })
	t.Run("stored state is a copy", func(t *testing.T) { testStoredStateIsACopy(t, newStore(t)) })
	t.Run("unencodable state refused", func(t *testing.T) { testUnencodableStateRefused(t, newStore(t)) })
}

func testParamsRoundTrip(t *testing.T, s Store) {
	ctx := context.Background()
	if _, err := s.ReadParams(ctx, "x"); !errors.Is(err, protocol.ErrNotFound) {
		t.Fatalf("ReadParams(missing) error = %v; want protocol.ErrNotFound", err)
	}
	attrs := map[string]any{
		"setpoint": 65.5, "kp": 1.0, "mode": "manual", "enabled": false,
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": "db-1"},
		"x_note":            "operator's own attribute",
		"kd":                "not a number", // stored as is: validation is the reader's job
	}
	if err := s.WriteParams(ctx, "x", attrs); err != nil {
		t.Fatalf("WriteParams: %v", err)
	}
	wantRead(t, "ReadParams", s.ReadParams, "x", attrs)
	p := SampleParams("y")
	paramsThroughStore(t, s, p)
	// A loop with a further signal: a map of maps with numbers.
	a := p.Attrs(looptest.Sources())
	a["signals"] = map[string]any{"lag": map[string]any{"setpoint": 10.0, "unit": "s", "kp": 20.0, "ki": 0.05,
		"metric_source": "prometheus", "metric_promql": "max(mysql_slave_status_seconds_behind_master)"}}
	sp, err := loop.DecodeParams("z", a, looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	paramsThroughStore(t, s, sp)
}

// paramsThroughStore writes p's attributes as the PARAMS of loop p.Loop and
// fails t unless what it reads back decodes to p.
func paramsThroughStore(t *testing.T, s Store, p loop.Params) {
	t.Helper()
	ctx := context.Background()
	if err := s.WriteParams(ctx, p.Loop, p.Attrs(looptest.Sources())); err != nil {
		t.Fatalf("WriteParams(%s): %v", p.Loop, err)
	}
	raw, err := s.ReadParams(ctx, p.Loop)
	if err != nil {
		t.Fatal(err)
	}
	back, err := loop.DecodeParams(p.Loop, raw, looptest.Sources())
	if err != nil {
		t.Fatalf("DecodeParams(ReadParams(Attrs()), looptest.Sources()): %v", err)
	}
	if !reflect.DeepEqual(back, p) {
		t.Errorf("params after store round trip = %+v; want %+v", back, p)
	}
}

// wantRead reads item id with read and fails t unless it is want; name
// names read in a failure.
func wantRead[T any](t *testing.T, name string, read func(context.Context, string) (T, error), id string, want T) {
	t.Helper()
	got, err := read(context.Background(), id)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s = %+v\nwant %+v", name, got, want)
	}
}

func testLoadLoops(t *testing.T, s Store) {
	ctx := context.Background()
	at := contractTime()
	snaps, err := s.LoadLoops(ctx)
	if err != nil || len(snaps) != 0 {
		t.Fatalf("LoadLoops(empty) = %v, %v; want none", snaps, err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := s.WriteParams(ctx, id, SampleParams(id).Attrs(looptest.Sources())); err != nil {
			t.Fatal(err)
		}
	}
	st := loop.State{Loop: "b", Version: 1, TickAt: at, Rate: 5}
	if err := s.CommitTick(ctx, loop.Commit{State: st}); err != nil {
		t.Fatal(err)
	}
	snaps, err = s.LoadLoops(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]loop.Snapshot{}
	for _, sn := range snaps {
		got[sn.Loop] = sn
	}
	if len(got) != 3 {
		t.Fatalf("LoadLoops returned loops %v; want a, b, c", snaps)
	}
	for id, sn := range got {
		if sn.Params == nil {
			t.Errorf("loop %s: no params", id)
		}
		if (sn.State != nil) != (id == "b") {
			t.Errorf("loop %s: state = %v; want one only for b", id, sn.State)
		}
	}
	if sn := got["b"]; sn.State != nil && (sn.State.Version != 1 || sn.State.Rate != 5) {
		t.Errorf("loop b state = %+v; want version 1, rate 5", *sn.State)
	}
}

// sampleState is a STATE with every part set: a loop with nodes, two
// signals, a drift verdict and an aborted experiment, at tick 1.
func sampleState(at time.Time) loop.State {
	p := SampleParams("l")
	bc := loop.DefaultBalanceConfig(time.Minute)
	p.Nodes = []loop.Node{{Name: "a", Endpoint: "http://a:8080/", Metric: "db-a"}, {Name: "b", Endpoint: "http://b:8080/", Metric: "DBInstanceIdentifier=db-b"}}
	p.Balance, p.Regulate = &bc, loop.RegulateMean
	p.Signals = []loop.Signal{{Name: "lag",
		Controls: loop.Controls{Unit: "s", Setpoint: 10, Kp: 20, Ki: 0.05, AntiWindup: control.AntiWindupConditional},
		Sensing: loop.Sensing{Metric: metric.Query{Source: prommetric.Name, PromQL: "max(mysql_slave_status_seconds_behind_master)"},
			Stale: control.StalePolicy{Action: control.StaleFailClosed}, StaleAfter: 2 * time.Minute}}}
	return loop.State{
		Loop: "l", Version: 1, Schema: loop.StateSchema, TickAt: at, MetricAt: at.Add(-2 * time.Minute), Measured: 66.5,
		Setpoint: 70, Rate: 321.5, Mode: loop.ModeShadow, Stale: true, StaleSince: at.Add(-time.Minute),
		Terms:  control.Output{Rate: 321.5, P: 7, I: 300, D: -1, FF: 15.5, Saturated: true},
		Params: &p, ParamsFingerprint: loop.Fingerprint(p.Attrs(looptest.Sources())),
		Balance: balance.State{Mean: 61.25, Ticks: 7, Nodes: map[string]balance.NodeState{
			"a": {Weight: 1.0 / 6, Error: -0.012345678901234567, Primed: true},
			"b": {Weight: 1.0 / 3, Error: 0.1},
			"c": {Weight: 0.5, Missing: 2},
		}},
		Drift: drift.State{
			Samples:    []drift.Sample{{End: 58 * time.Minute, Y: 66.5, Z: 55.25}, {End: 59 * time.Minute, Y: 67, Z: 56}},
			ModelDrift: true, GainRatio: 2.02, SlopeSE: 0.125, Since: at, Votes: 2,
			Model: drift.Model{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second},
		},
		Limiting:  "lag",
		Reason:    loop.Reason{Code: loop.ReasonLimited, Text: "limited by lag: 11.2 s above its 10 s setpoint; backlog 1.2e+06 drains in 3 h 10 m at the allowed 105 msg/s"},
		OldestAge: 22*time.Hour + 1500*time.Millisecond, ExpiresIn: 2 * time.Hour,
		Experiment: &loop.ExperimentState{ID: "e1", Status: loop.ExperimentAborted, Reason: "datapoint 86 at or above the ceiling 85",
			StartedAt: at.Add(-10 * time.Minute), EndedAt: at, Setpoint: 70, Rate: 300},
		Signals: []loop.SignalState{
			{Name: "cpu", Controller: control.State{Init: true, Clock: time.Hour, Integral: 300, FilteredSetpoint: 69.9, Measurement: 66.5,
				HaveMeasurement: true, SampleEnd: 59 * time.Minute, Output: 321.5, Kp: 2,
				Reference: []control.Segment{{At: -time.Hour, Value: 60}, {At: time.Minute, Value: 70}}},
				MetricAt: at.Add(-2 * time.Minute), Measured: 66.5, Setpoint: 70, Unit: "%",
				Terms: control.Output{Rate: 400, P: 7, I: 300}, Tracking: true, Stale: true, StaleSince: at.Add(-time.Minute)},
			{Name: "lag", Controller: control.State{Init: true, Integral: 321.5, Output: 321.5, Kp: 20},
				MetricAt: at.Add(-time.Minute), Measured: 11.25, Setpoint: 10, Unit: "s", Terms: control.Output{Rate: 321.5, P: -25}},
		},
	}
}

func testCommitRoundTrip(t *testing.T, s Store) {
	ctx := context.Background()
	at := contractTime()
	st := sampleState(at)
	rate := protocol.Rate{Loop: "l", PerSecond: 321.5, WrittenAt: at, ExpiresAt: at.Add(3 * time.Minute), Tick: 1,
		Weights: map[string]float64{"http://a:8080/": 1.0 / 6, "http://b:8080/": 1.0 / 3, "http://c:8080/": 0.5},
		Inner:   &protocol.InnerSettings{Tolerance: 0.2, ReactionTime: 20 * time.Second}}
	status := loop.ParamsStatus{Loop: "l", Status: loop.StatusRefused, Reason: "kp: -1 must be a finite number >= 0",
		InForce: "last valid parameters", Fingerprint: "abc", CheckedAt: at, Tick: 1}
	if err := s.CommitTick(ctx, loop.Commit{PrevVersion: 0, State: st, Rate: &rate, Status: &status}); err != nil {
		t.Fatalf("CommitTick: %v", err)
	}
	wantRead(t, "ReadState", s.ReadState, "l", st)
	gotRate, err := s.ReadRate(ctx, "l")
	if err != nil {
		t.Fatal(err)
	}
	assertRate(t, gotRate, rate)
	wantRead(t, "ReadStatus", s.ReadStatus, "l", status)

	// A commit without rate or status leaves them as they were.
	st2 := loop.State{Loop: "l", Version: 2, TickAt: at.Add(time.Minute), Measured: math.NaN()}
	if err := s.CommitTick(ctx, loop.Commit{PrevVersion: 1, State: st2}); err != nil {
		t.Fatalf("second CommitTick: %v", err)
	}
	if r, err := s.ReadRate(ctx, "l"); err != nil || r.Tick != 1 {
		t.Errorf("RATE after a commit without rate = %+v, %v; want the tick 1 rate", r, err)
	}
	if got, err := s.ReadState(ctx, "l"); err != nil || got.Version != 2 || !math.IsNaN(got.Measured) {
		t.Errorf("STATE after second commit = %+v, %v; want version 2 with no measurement (NaN)", got, err)
	}
}

func testConditionalOnVersion(t *testing.T, s Store) {
	ctx := context.Background()
	at := contractTime()
	commit := func(prev int64) error {
		return s.CommitTick(ctx, loop.Commit{PrevVersion: prev, State: loop.State{Loop: "v", Version: prev + 1, TickAt: at}})
	}
	steps := []struct {
		prev     int64
		conflict bool
	}{{0, false}, {0, true}, {2, true}, {1, false}, {1, true}, {2, false}}
	for i, st := range steps {
		err := commit(st.prev)
		if st.conflict != errors.Is(err, loop.ErrConflict) || (!st.conflict && err != nil) {
			t.Errorf("step %d: CommitTick(prev %d) = %v; want conflict %v", i, st.prev, err, st.conflict)
		}
	}
	if err := s.CommitTick(ctx, loop.Commit{PrevVersion: 3, State: loop.State{Loop: "v", Version: 7}}); err == nil || errors.Is(err, loop.ErrConflict) {
		t.Errorf("CommitTick with a version that does not follow = %v; want a non-conflict error", err)
	}
}

func testOneWinnerAmongConcurrentCommits(t *testing.T, s Store) {
	ctx := context.Background()
	at := contractTime()
	if err := s.CommitTick(ctx, loop.Commit{State: loop.State{Loop: "race", Version: 1}}); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := protocol.Rate{Loop: "race", PerSecond: float64(i), WrittenAt: at, ExpiresAt: at.Add(time.Minute), Tick: 2}
			errs[i] = s.CommitTick(ctx, loop.Commit{PrevVersion: 1, State: loop.State{Loop: "race", Version: 2, Rate: float64(i)}, Rate: &r})
		}()
	}
	wg.Wait()
	winners, winner := 0, -1
	for i, err := range errs {
		switch {
		case err == nil:
			winners++
			winner = i
		case !errors.Is(err, loop.ErrConflict):
			t.Errorf("commit %d: %v; want nil or loop.ErrConflict", i, err)
		}
	}
	if winners != 1 {
		t.Fatalf("%d concurrent commits won; want exactly 1", winners)
	}
	r, err := s.ReadRate(ctx, "race")
	if err != nil || r.PerSecond != float64(winner) {
		t.Errorf("RATE = %+v, %v; want the winner's rate %d", r, err, winner)
	}
	st, err := s.ReadState(ctx, "race")
	if err != nil || st.Rate != float64(winner) || st.Version != 2 {
		t.Errorf("STATE = %+v, %v; want version 2 with the winner's rate %d", st, err, winner)
	}
}

// testStoredStateIsACopy: what a commit wrote does not change when the
// committed value, or a loaded snapshot, is changed afterwards in place (a
// controller appends to its histories in place: a tick that lost a race must
// not leave its values in the winner's stored history).
func testStoredStateIsACopy(t *testing.T, s Store) {
	ctx := context.Background()
	hist := make([]control.Segment, 2, 16) // room to grow in place
	hist[0], hist[1] = control.Segment{At: -time.Hour, Value: 100}, control.Segment{At: time.Minute, Value: 200}
	st := loop.State{Loop: "c", Version: 1, TickAt: contractTime(),
		Signals: []loop.SignalState{{Name: "cpu", Controller: control.State{Init: true, Applied: hist, Reference: slices.Clone(hist)}}}}
	if err := s.CommitTick(ctx, loop.Commit{State: st}); err != nil {
		t.Fatal(err)
	}
	want, err := s.ReadState(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	st.Signals[0].Controller.Applied[1].Value = -1
	_ = append(st.Signals[0].Controller.Applied, control.Segment{At: 2 * time.Minute, Value: -2})
	snaps, err := s.LoadLoops(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, snap := range snaps {
		if snap.State != nil && len(snap.State.Signals) > 0 {
			c := snap.State.Signals[0].Controller
			for _, h := range [][]control.Segment{c.Applied, c.Reference} {
				if len(h) > 1 {
					h[1].Value = -3
					_ = append(h[:1], control.Segment{Value: -4})
				}
			}
		}
	}
	if got, err := s.ReadState(ctx, "c"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("STATE after the committed value and a snapshot were changed in place = %+v, %v; want %+v", got.Signals, err, want.Signals)
	}
}

// testUnencodableStateRefused: a state that JSON cannot encode (NaN in the
// controller's memory) is refused as an error, not a conflict, and nothing
// of the commit is written.
func testUnencodableStateRefused(t *testing.T, s Store) {
	ctx := context.Background()
	at := contractTime()
	st := loop.State{Loop: "n", Version: 1, TickAt: at, Signals: []loop.SignalState{{Name: "cpu", Controller: control.State{Init: true, Integral: math.NaN()}}}}
	rate := protocol.Rate{Loop: "n", PerSecond: 5, WrittenAt: at, ExpiresAt: at.Add(time.Minute), Tick: 1}
	err := s.CommitTick(ctx, loop.Commit{State: st, Rate: &rate})
	if err == nil || errors.Is(err, loop.ErrConflict) {
		t.Fatalf("CommitTick of a controller state with a NaN integrator = %v; want an error that is not a conflict", err)
	}
	if _, err := s.ReadState(ctx, "n"); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("ReadState after the refused commit: %v; want protocol.ErrNotFound", err)
	}
	if _, err := s.ReadRate(ctx, "n"); !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("ReadRate after the refused commit: %v; want protocol.ErrNotFound", err)
	}
}

// testParamsIf checks WriteParamsIf: each write bumps the edit version; a
// write at a version no longer stored is refused with ErrParamsConflict and
// writes nothing; of two concurrent writes at the same version one wins.
func testParamsIf(t *testing.T, s Store) {
	ctx := context.Background()
	if err := s.WriteParams(ctx, "e", map[string]any{"setpoint": 70.0}); err != nil {
		t.Fatal(err)
	}
	step := func(read int64, setpoint float64, wantErr error) {
		t.Helper()
		err := s.WriteParamsIf(ctx, "e", map[string]any{"setpoint": setpoint}, read)
		if !errors.Is(err, wantErr) {
			t.Fatalf("WriteParamsIf(read %d) = %v; want %v", read, err, wantErr)
		}
	}
	step(0, 60, nil)
	step(0, 50, loop.ErrParamsConflict)
	step(1, 40, nil)
	got, err := s.ReadParams(ctx, "e")
	if err != nil || got["setpoint"] != 40.0 || loop.ParamsVersion(got) != 2 {
		t.Fatalf("after two edits: %v, %v; want setpoint 40 at edit version 2", got, err)
	}
	if err := s.WriteParamsIf(ctx, "new", map[string]any{"setpoint": 70.0}, 0); err != nil {
		t.Fatalf("WriteParamsIf(new loop) = %v", err)
	}
	errs := make(chan error, 2)
	for _, sp := range []float64{30, 20} {
		go func() { errs <- s.WriteParamsIf(ctx, "e", map[string]any{"setpoint": sp}, 2) }()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), loop.ErrParamsConflict) {
		t.Fatalf("concurrent writes at the same version: %v, %v; want one applied, one conflict", e1, e2)
	}
}
