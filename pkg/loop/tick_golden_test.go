package loop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"testing"
)

// goldenOneSignalPath is the STATE and RATE of one-signal loops over a
// scripted metric, recorded from the tick before loops could have several
// signals (override control): a PARAMS item written before then must tick to the
// same STATE and RATE, byte for byte.
const goldenOneSignalPath = "testdata/golden_one_signal.jsonl"

// goldenTick is one line of the golden file.
type goldenTick struct {
	Tick  int             `json:"tick"`
	Loop  string          `json:"loop"`
	State json.RawMessage `json:"state"`
	Rate  json.RawMessage `json:"rate"`
}

// goldenLoops are the one-signal items of the golden run: a plain PI loop
// that holds on a stale metric, and a loop with feedforward, a delay-aware
// integrator, a setpoint filter, a slew limit, a noise band and decay.
var goldenLoops = map[string]func(a map[string]any){
	"plain": func(a map[string]any) { a["stale_policy"] = "hold" },
	"model": func(a map[string]any) {
		a["setpoint"], a["kp"], a["ki"], a["slew_limit"] = 65.0, 1.0, 0.05, 150.0
		a["ff_gain"], a["ff_base"], a["ff_tau"], a["ff_dead_time"], a["delay_aware"] = 0.05, 10.0, "30s", "10s", true
		a["setpoint_filter"], a["noise_band"], a["max_rate"] = "2m", 2.0, 3000.0
		a["stale_policy"], a["stale_decay"], a["stale_after"] = "decay", "3m", "4m"
	},
}

// goldenCPU is the scripted measurement of tick i; NaN: an outage (the
// newest datapoint stays the one of that tick).
func goldenCPU(loop string, i int) float64 {
	if i >= 25 && i < 33 {
		return math.NaN()
	}
	v := 55 + 20*math.Sin(float64(i)/6)
	if loop == "model" {
		v = 40 + 30*math.Sin(float64(i)/9) + 5*math.Cos(float64(i)*1.3)
	}
	return v
}

func runGoldenOneSignal(t *testing.T) []byte {
	r := newRig(t)
	for id, edit := range goldenLoops {
		r.params(id, edit)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for i := range 60 {
		for _, id := range []string{"model", "plain"} {
			switch v := goldenCPU(id, i); {
			case !math.IsNaN(v):
				r.cpu(id, v, 90e9)
			case math.IsNaN(goldenCPU(id, i-1)):
			default:
				r.freeze(id, goldenCPU(id, i-1))
			}
		}
		r.tick("plain")
		for _, id := range []string{"model", "plain"} {
			st, err := r.store.ReadState(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			rate, err := r.store.ReadRate(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			sb, err := json.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			rb, err := json.Marshal(rate)
			if err != nil {
				t.Fatal(err)
			}
			if err := enc.Encode(goldenTick{Tick: i, Loop: id, State: sb, Rate: rb}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return buf.Bytes()
}

// TestTickGoldenOneSignal: a one-signal PARAMS item ticks to the STATE and
// RATE recorded before override control. Rewrite the file only
// for an intended change: go test ./pkg/loop -run TestTickGoldenOneSignal -update.
func TestTickGoldenOneSignal(t *testing.T) {
	got := runGoldenOneSignal(t)
	if *update {
		if err := os.WriteFile(goldenOneSignalPath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(goldenOneSignalPath)
	if err != nil {
		t.Fatal(err)
	}
	gl, wl := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range min(len(gl), len(wl)) {
		if !bytes.Equal(gl[i], wl[i]) {
			t.Fatalf("line %d differs from %s:\n got %s\nwant %s", i+1, goldenOneSignalPath, gl[i], wl[i])
		}
	}
	if len(gl) != len(wl) {
		t.Fatalf("%d lines; %s has %d", len(gl), goldenOneSignalPath, len(wl))
	}
}
