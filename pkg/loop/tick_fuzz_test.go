package loop_test

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

// FuzzTickProperties drives the production tick against random plants with
// random PARAMS within validation, stale outages, missed schedules and edits
// of bounds, gains, feedforward and modes. After every tick the rate is
// finite and within the bounds in force, the controller's state round-trips
// through JSON exactly, and the rate rose by no more than the slew limit (it
// may fall at once: a lower manual rate, max_rate or setpoint takes effect
// at the next tick).
func FuzzTickProperties(f *testing.F) {
	for seed := range uint64(64) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 11))
		m := control.FOPDT{
			Gain: 0.005 + 0.2*rng.Float64(), Base: 40 * rng.Float64(),
			Tau: time.Duration(rng.IntN(300)) * time.Second, DeadTime: time.Duration(rng.IntN(120)) * time.Second,
		}
		pl := newPlantLoop(t, m, 100*rng.Float64(), time.Minute, time.Duration(30+rng.IntN(150))*time.Second)
		p := randomParams(rng, m, nil)
		write(t, pl, p)
		var prev *loop.Report
		for k := range 150 {
			switch x := rng.IntN(100); {
			case x < 10:
				p = randomParams(rng, m, p)
				write(t, pl, p)
			case x < 14:
				pl.outage = !pl.outage
			case x < 18:
				pl.dist = 60*rng.Float64() - 30
			case x < 21: // the schedule misses a few invocations
				pl.run(time.Duration(1+rng.IntN(8)) * time.Minute)
			}
			rep, _ := pl.step()
			in, err := loop.DecodeParams(pl.id, p, looptest.Sources())
			if err != nil {
				t.Fatalf("tick %d: the generator wrote invalid PARAMS: %v", k, err)
			}
			checkTick(t, k, pl, in, rep, prev)
			prev = &rep
		}
	})
}

func write(t *testing.T, pl *plantLoop, attrs map[string]any) {
	t.Helper()
	if err := pl.store.WriteParams(context.Background(), pl.id, attrs); err != nil {
		t.Fatal(err)
	}
}

// checkTick checks one tick's properties.
func checkTick(t *testing.T, k int, pl *plantLoop, p loop.Params, rep loop.Report, prev *loop.Report) {
	t.Helper()
	if rep.Outcome != loop.OutcomeApplied {
		t.Fatalf("tick %d: outcome %s (%v); want applied", k, rep.Outcome, rep.Err)
	}
	if math.IsNaN(rep.Rate) || rep.Rate < p.MinRate || rep.Rate > p.MaxRate {
		t.Fatalf("tick %d: rate %v outside [%v, %v] (%+v)", k, rep.Rate, p.MinRate, p.MaxRate, rep)
	}
	st, err := pl.store.ReadState(context.Background(), pl.id)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Signals) == 0 {
		t.Fatalf("tick %d: STATE has no signal record", k)
	}
	cs := st.Signals[0].Controller
	b, err := json.Marshal(cs)
	if err != nil {
		t.Fatalf("tick %d: controller state cannot be saved: %v", k, err)
	}
	var back control.State
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, cs) {
		t.Fatalf("tick %d: state does not round-trip (%v):\n%+v\nwant\n%+v", k, err, back, cs)
	}
	if prev != nil && p.SlewLimit > 0 {
		limit := max(prev.Rate+p.SlewLimit, p.MinRate)
		if rep.Rate > limit*(1+1e-12) {
			t.Fatalf("tick %d: rate rose %v -> %v; want at most the slew limit %v (mode %s, stale %v, resumed %v)",
				k, prev.Rate, rep.Rate, p.SlewLimit, rep.Mode, rep.Stale, rep.Resumed)
		}
	}
}

// randomParams returns PARAMS within validation for a loop on a plant like
// m (its feedforward model may be wrong): fresh ones when prev is nil,
// otherwise prev with one kind of edit.
func randomParams(rng *rand.Rand, m control.FOPDT, prev map[string]any) map[string]any {
	a := map[string]any{}
	for k, v := range prev {
		a[k] = v
	}
	pick := func(vs ...string) string { return vs[rng.IntN(len(vs))] }
	dur := func(max time.Duration) string {
		return time.Duration(rng.Int64N(int64(max))).Round(time.Second).String()
	}
	gains := func() {
		a["kp"], a["ki"], a["kd"] = 20*rng.Float64(), rng.Float64()/10, 0.0
		if rng.IntN(3) == 0 {
			a["kd"], a["derivative_filter"] = 200*rng.Float64(), dur(time.Minute)
		}
		if rng.IntN(10) == 0 { // extreme but valid
			a["kp"], a["ki"], a["kd"] = 1e300, 1e300*rng.Float64(), 1e300*rng.Float64()
		}
		a["anti_windup"] = pick("conditional", "back-calculation", "none")
		a["tracking_time"], a["setpoint_filter"], a["noise_band"] = dur(5*time.Minute), dur(5*time.Minute), 3*rng.Float64()
	}
	bounds := func() {
		lo := 200 * rng.Float64()
		a["min_rate"], a["max_rate"] = lo, lo+10+3000*rng.Float64()
		a["slew_limit"] = 0.0
		if rng.IntN(2) == 0 {
			a["slew_limit"] = 1 + 300*rng.Float64()
		}
		if a["mode"] == "manual" {
			a["manual_rate"] = lo + (a["max_rate"].(float64)-lo)*rng.Float64()
		}
	}
	feedforward := func() {
		delete(a, "delay_aware")
		for _, k := range []string{"ff_gain", "ff_base", "ff_tau", "ff_dead_time"} {
			delete(a, k)
		}
		if rng.IntN(3) == 0 {
			return
		}
		a["ff_gain"], a["ff_base"] = m.Gain*(0.5+rng.Float64()), m.Base+10*rng.Float64()-5
		a["ff_tau"], a["ff_dead_time"], a["delay_aware"] = dur(5*time.Minute), dur(2*time.Minute), rng.IntN(2) == 0
	}
	mode := func() {
		a["mode"] = pick("auto", "auto", "manual", "shadow")
		delete(a, "manual_rate")
		if a["mode"] == "manual" {
			lo, hi := a["min_rate"].(float64), a["max_rate"].(float64)
			a["manual_rate"] = lo + (hi-lo)*rng.Float64()
		}
	}
	if prev == nil {
		a["metric_dimensions"] = map[string]any{"DBInstanceIdentifier": "a"}
		a["setpoint"] = 5 + 90*rng.Float64()
		a["stale_policy"], a["safe_rate"] = pick("hold", "decay", "fail-closed"), 300*rng.Float64()
		a["stale_after"], a["stale_decay"], a["stale_grace"] = (time.Duration(2+rng.IntN(8)) * time.Minute).String(), dur(5*time.Minute)+"1s", dur(3*time.Minute)
		gains()
		a["mode"] = "auto"
		bounds()
		feedforward()
		mode()
		return a
	}
	switch rng.IntN(5) {
	case 0:
		gains()
	case 1:
		bounds()
	case 2:
		feedforward()
	case 3:
		mode()
	default:
		a["setpoint"] = 5 + 90*rng.Float64()
	}
	return a
}
