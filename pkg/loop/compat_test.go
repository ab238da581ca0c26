package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// The compatibility corpus: PARAMS items as DynamoDB holds them (one per
// shape a loop can have), the STATE each had after compatWarmup ticks of
// the controller that wrote them, and what the next compatTicks ticks
// output from there. A controller must keep reading these items and tick
// on from them to the same figures: rewrite the files only for an intended
// change of behaviour (go test ./pkg/loop -run TestCompat -update).
const (
	compatDir    = "testdata/compat"
	compatWarmup = 4
	compatTicks  = 4
)

// compatCases are the PARAMS items of the corpus, by name.
var compatCases = map[string]map[string]any{
	"one_signal": valid(func(a map[string]any) {
		a["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": "db"}
		a["ff_gain"], a["ff_base"], a["ff_tau"], a["ff_dead_time"], a["delay_aware"] = 0.05, 10.0, "30s", "10s", true
		a["noise_band"], a["setpoint_filter"], a["slew_limit"] = 2.0, "2m", 100.0
		a["stale_policy"], a["stale_after"] = "decay", "4m"
		a["direction"] = "ceiling"
	}),
	"signals": valid(func(a map[string]any) {
		a["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": "db"}
		a["signal"] = "cpu"
		a["signals"] = map[string]any{
			"lag": map[string]any{"setpoint": 10.0, "kp": 20.0, "ki": 0.5, "unit": "s", "direction": "ceiling",
				"metric_dimensions": map[string]any{"DBInstanceIdentifier": "lag"}, "drain_feedforward": true},
			"latency": map[string]any{"setpoint": 200.0, "kp": 1.0, "ki": 0.02, "unit": "ms",
				"metric_name": "Latency", "metric_dimensions": map[string]any{"DBInstanceIdentifier": "latency"}},
		}
	}),
	"nodes": valid(func(a map[string]any) {
		a["metric_dimensions"] = map[string]any{"Cluster": "c1"}
		a["nodes"] = map[string]any{
			"n1": map[string]any{"endpoint": "http://n1", "metric": "DBInstanceIdentifier=n1"},
			"n2": map[string]any{"endpoint": "http://n2", "metric": "DBInstanceIdentifier=n2"},
		}
		a["regulate"], a["balance_kp"] = "max", 0.4
	}),
	"mapping": valid(func(a map[string]any) {
		a["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": "db"}
		a["esm_uuid"], a["esm_update_interval"], a["esm_min_concurrency"] = "esm-1", "2m", 3.0
		a["demand_headroom"] = 0.3
	}),
	"experiment": valid(func(a map[string]any) {
		a["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": "db"}
		a["ff_gain"], a["ff_base"] = 0.05, 10.0
		a["experiment"] = "id=x1,kind=setpoint-step,step=5,abort_above=90,max_duration=10m,max_rate_step=200"
	}),
}

// compatStart is the time of the corpus' first tick.
var compatStart = time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)

// compatMetric is the scripted value of the series key at tick i.
func compatMetric(key string, i int) float64 {
	switch key {
	case "lag":
		return 4 + 3*float64(i%5)
	case "latency":
		return 150 + 20*math.Sin(float64(i))
	case "n2":
		return 50 + 10*math.Cos(float64(i)/2)
	}
	return 55 + 15*math.Sin(float64(i)/3)
}

// compatStore is a TickStore holding one loop, its consumers reporting
// steady batches.
type compatStore struct {
	loop   string
	params map[string]any
	state  *loop.State
	rate   *protocol.Rate
	tick   int
}

func (s *compatStore) LoadLoops(context.Context) ([]loop.Snapshot, error) {
	now := compatStart.Add(time.Duration(s.tick) * time.Minute)
	n := int64(s.tick + 1)
	peer := protocol.Peer{Loop: s.loop, Instance: "i-1", StartedAt: compatStart.Add(-time.Hour), ReportedAt: now, ExpiresAt: now.Add(15 * time.Second),
		Stored: n * 6000, Batches: n * 60, BatchMessages: n * 6000, Working: time.Duration(n) * 30 * time.Second}
	var st *loop.State
	if s.state != nil {
		c := s.state.Clone()
		st = &c
	}
	return []loop.Snapshot{{Loop: s.loop, Params: s.params, State: st, Peers: []protocol.Peer{peer}}}, nil
}

func (s *compatStore) CommitTick(_ context.Context, c loop.Commit) error {
	if err := c.Validate(); err != nil {
		return err
	}
	st := c.State.Clone()
	s.state = &st
	if c.Rate != nil {
		r := *c.Rate
		s.rate = &r
	}
	return nil
}

// compatReader answers each query with compatMetric of its
// DBInstanceIdentifier at the store's tick, published 90 s after its
// period ended.
type compatReader struct{ s *compatStore }

func (m compatReader) ReadMetrics(_ context.Context, qs []metric.Query, now time.Time) ([]metric.Sample, error) {
	out := make([]metric.Sample, len(qs))
	for i, q := range qs {
		key := q.Dimensions["DBInstanceIdentifier"]
		out[i] = metric.Sample{Value: compatMetric(key, m.s.tick), Time: now.Add(-90*time.Second - q.Period), Found: true}
	}
	return out, nil
}

// compatMapping is an event source mapping at a fixed concurrency.
type compatMapping struct{ n int }

func (m *compatMapping) MaximumConcurrency(context.Context, string) (int, error) { return m.n, nil }
func (m *compatMapping) SetMaximumConcurrency(_ context.Context, _ string, n int) error {
	m.n = n
	return nil
}

// compatTick runs s's loop's tick i.
func compatTick(t *testing.T, s *compatStore, m *compatMapping, i int) loop.Report {
	t.Helper()
	s.tick = i
	tk := &loop.Ticker{Sources: looptest.Sources(), Store: s, Metrics: map[string]metric.Reader{"cloudwatch": compatReader{s}},
		Now: func() time.Time { return compatStart.Add(time.Duration(i) * time.Minute) }, Mappings: m}
	reps, err := tk.Tick(context.Background())
	if err != nil || len(reps) != 1 {
		t.Fatalf("tick %d: %v, %d reports", i, err, len(reps))
	}
	return reps[0]
}

// figure is a number as the corpus records it (NaN included).
func figure(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// compatFigures are the main figures of a tick's report and its RATE.
func compatFigures(rep loop.Report, rate *protocol.Rate) map[string]any {
	f := map[string]any{
		"outcome": string(rep.Outcome), "tick": rep.Tick, "err": fmt.Sprint(rep.Err),
		"setpoint": figure(rep.Setpoint), "measured": figure(rep.Measured), "rate": figure(rep.Rate),
		"rate_written": rep.RateWritten, "stale": rep.Stale,
		"p": figure(rep.P), "i": figure(rep.I), "d": figure(rep.D), "ff": figure(rep.FF), "saturated": rep.Saturated,
		"limiting": rep.Limiting, "demand_limited": rep.DemandLimited, "processed": figure(rep.Processed),
	}
	if rep.Reason != nil {
		f["reason"] = string(rep.Reason.Code) + ": " + rep.Reason.Text
	}
	if len(rep.Signals) == 1 {
		// One signal: its record is the loop's (the corpus records the
		// signals of a selection only).
		s := rep.Signals[0]
		if s.Rate != rep.Rate || figure(s.Measured) != figure(rep.Measured) || s.Stale != rep.Stale || s.Tracking || s.Setpoint != rep.Setpoint {
			f["signal."+s.Name] = fmt.Sprintf("one signal differs from the loop: rate=%s measured=%s tracking=%v stale=%v", figure(s.Rate), figure(s.Measured), s.Tracking, s.Stale)
		}
	}
	for _, s := range rep.Signals[:len(rep.Signals)*min(len(rep.Signals)-1, 1)] {
		f["signal."+s.Name] = fmt.Sprintf("rate=%s measured=%s tracking=%v stale=%v", figure(s.Rate), figure(s.Measured), s.Tracking, s.Stale)
	}
	for k, w := range rep.Weights {
		f["weight."+k] = figure(w)
	}
	if m := rep.Mapping; m != nil {
		f["mapping"] = fmt.Sprintf("concurrency=%d target=%d updated=%v", m.Concurrency, m.Target, m.Updated)
	}
	if rate != nil {
		b, _ := json.Marshal(rate)
		f["RATE"] = string(b)
	}
	return f
}

// compatRun ticks s from tick `from` for compatTicks ticks and returns the
// figures, one JSON line per tick.
func compatRun(t *testing.T, s *compatStore, m *compatMapping, from int) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := from; i < from+compatTicks; i++ {
		rep := compatTick(t, s, m, i)
		if err := enc.Encode(compatFigures(rep, s.rate)); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompat: every PARAMS item of the corpus decodes, its STATE decodes,
// and the loop ticks on from it to the recorded RATE and figures.
func TestCompat(t *testing.T) {
	for name, params := range compatCases {
		t.Run(name, func(t *testing.T) {
			base := filepath.Join(compatDir, name)
			if *update {
				writeJSON(t, base+".params.json", params)
			}
			var attrs map[string]any
			readJSON(t, base+".params.json", &attrs)
			if _, err := loop.DecodeParams(name, attrs, looptest.Sources()); err != nil {
				t.Fatalf("DecodeParams(%s) = %v", base+".params.json", err)
			}
			m := &compatMapping{n: 10}
			if *update {
				s := &compatStore{loop: name, params: attrs}
				for i := range compatWarmup {
					compatTick(t, s, m, i)
				}
				writeJSON(t, base+".state.json", s.state)
				if err := os.WriteFile(base+".ticks.jsonl", compatRun(t, s, m, compatWarmup), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var st loop.State
			readJSON(t, base+".state.json", &st)
			s := &compatStore{loop: name, params: attrs, state: &st}
			m.n = st.Mapping.Concurrency
			got := compatRun(t, s, m, compatWarmup)
			want, err := os.ReadFile(base + ".ticks.jsonl")
			if err != nil {
				t.Fatal(err)
			}
			gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
			for i := range min(len(gl), len(wl)) {
				if !bytes.Equal(gl[i], wl[i]) {
					t.Errorf("tick %d differs from %s:\n got %s\nwant %s", compatWarmup+i, base+".ticks.jsonl", gl[i], wl[i])
				}
			}
			if len(gl) != len(wl) {
				t.Errorf("%d lines; %s has %d", len(gl), base+".ticks.jsonl", len(wl))
			}
		})
	}
}

// TestCompatSchema3: a STATE that the controller of schema 3 wrote (before
// the tick's reason was kept) reads and ticks on: the next tick writes the
// current schema with a reason.
func TestCompatSchema3(t *testing.T) {
	var st loop.State
	readJSON(t, filepath.Join(compatDir, "one_signal.schema3.state.json"), &st)
	if st.Schema != 3 || st.Reason != (loop.Reason{}) || st.Params == nil {
		t.Fatalf("corpus STATE: schema %d, reason %+v, params %v; want schema 3 without a reason, with params", st.Schema, st.Reason, st.Params)
	}
	attrs := st.Params.Attrs(looptest.Sources())
	s := &compatStore{loop: st.Loop, params: attrs, state: &st}
	rep := compatTick(t, s, &compatMapping{}, 0)
	if rep.Outcome != loop.OutcomeApplied || rep.Reason == nil || rep.Reason.Code == "" {
		t.Fatalf("tick from a schema 3 STATE = %s, reason %v (err %v); want applied with a reason", rep.Outcome, rep.Reason, rep.Err)
	}
	if s.state.Schema != loop.StateSchema || s.state.Reason != *rep.Reason || s.state.Version != st.Version+1 {
		t.Errorf("STATE written: schema %d, version %d, reason %+v; want schema %d, version %d, reason %+v",
			s.state.Schema, s.state.Version, s.state.Reason, loop.StateSchema, st.Version+1, *rep.Reason)
	}
}
