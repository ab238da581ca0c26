package lab

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/ident"
)

func byName(t *testing.T, rep Report) map[string]Result {
	t.Helper()
	m := map[string]Result{}
	for _, r := range rep.Results {
		m[r.Controller] = r
	}
	return m
}

// TestAcceptanceReference is the lab's acceptance on the reference scenario:
// pi-aw-spf-ff overshoots at most 1 point at start-up, stays within 1.5 x
// the IAE bound, loses nothing and beats pi, fixed and aimd in the same run.
func TestAcceptanceReference(t *testing.T) {
	rep, err := Compare(sim.Reference(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := byName(t, rep)
	best := r[PIAWSPFF]
	if best.StartOvershootPP > 1 {
		t.Errorf("start overshoot %.2f points; want <= 1", best.StartOvershootPP)
	}
	if best.IAERatio > 1.5 {
		t.Errorf("iae_ratio %.2f; want <= 1.5", best.IAERatio)
	}
	for _, name := range Controllers() {
		if r[name].Lost != 0 {
			t.Errorf("%s lost %d messages", name, r[name].Lost)
		}
	}
	for _, other := range []string{PI, Fixed, AIMD} {
		if !(best.IAE < r[other].IAE) {
			t.Errorf("IAE %s %.0f, %s %.0f; want %s lower", PIAWSPFF, best.IAE, other, r[other].IAE, PIAWSPFF)
		}
	}
	if r[Fixed].IAERatio < 3 {
		t.Errorf("fixed rate iae_ratio %.2f; a fixed rate cannot follow the disturbance and the setpoint change", r[Fixed].IAERatio)
	}
	if best.SettlingS.Start == nil || best.SettlingS.Disturbance == nil || best.SettlingS.Setpoint == nil {
		t.Errorf("settling %+v: want every transient settled", best.SettlingS)
	}
}

// TestAcceptanceOtherPlants runs plants, metric delays, disturbances and
// noise that are not the reference: overshoot at most 2 points, iae_ratio at
// most 2.
func TestAcceptanceOtherPlants(t *testing.T) {
	type plant struct {
		name string
		mut  func(*sim.Scenario)
	}
	for _, tc := range []plant{
		{"slow plant, late metric", func(s *sim.Scenario) {
			s.Plant.Gain, s.Plant.Tau, s.Plant.DeadTime, s.MetricDelay = 0.08, time.Minute, 20*time.Second, 3*time.Minute
		}},
		{"low gain, high base, big disturbance", func(s *sim.Scenario) {
			s.Plant.Gain, s.Plant.Base, s.MetricDelay = 0.03, 20, time.Minute
			s.Disturbances = []sim.Disturbance{{At: 50 * time.Minute, Duration: 30 * time.Minute, Size: 30}}
		}},
		{"lagging plant, negative disturbance", func(s *sim.Scenario) {
			s.Plant.Tau, s.Plant.DeadTime, s.MetricDelay = 2*time.Minute, 30*time.Second, 2*time.Minute
			s.Disturbances = []sim.Disturbance{{At: time.Hour, Duration: 40 * time.Minute, Size: -15}}
		}},
		{"fast tick, two setpoint changes", func(s *sim.Scenario) {
			s.Tick, s.Plant.Gain = 30*time.Second, 0.1
			s.SetpointChanges = []sim.SetpointChange{{At: 100 * time.Minute, Value: 60}, {At: 140 * time.Minute, Value: 75}}
		}},
	} {
		for _, noise := range []float64{0, 1} {
			for _, seed := range []uint64{1, 2, 3} {
				s := sim.Reference()
				tc.mut(&s)
				s.Noise, s.Seed = noise, seed
				rep, err := Compare(s, Options{Controllers: []string{PIAWSPFF, PI}})
				if err != nil {
					t.Fatal(err)
				}
				r := byName(t, rep)[PIAWSPFF]
				if r.StartOvershootPP > 2 || r.IAERatio > 2 || r.Lost != 0 {
					t.Errorf("%s, noise %v, seed %d: overshoot %.2f, iae_ratio %.2f, lost %d; want <= 2, <= 2, 0",
						tc.name, noise, seed, r.StartOvershootPP, r.IAERatio, r.Lost)
				}
			}
		}
	}
}

func TestCompareUsesIdentifiedModel(t *testing.T) {
	// A deliberately wrong identifier (gain 20 % low) must change the tuned
	// controllers: the lab tunes from the identified model, not the truth.
	var calls int
	wrong := func(d ident.Data) (control.FOPDT, float64, error) {
		calls++
		m, rmse, err := FitFOPDT(d)
		m.Gain *= 0.8
		return m, rmse, err
	}
	good, err := Compare(sim.Reference(), Options{Controllers: []string{Fixed}})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := Compare(sim.Reference(), Options{Controllers: []string{Fixed}, Identify: wrong})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("identifier called %d times; want once", calls)
	}
	if !(bad.Results[0].StartOvershootPP > good.Results[0].StartOvershootPP+5) {
		t.Fatalf("fixed rate from a model with a 20 %% low gain overshoots %.1f points, from the fit %.1f: the model is not used",
			bad.Results[0].StartOvershootPP, good.Results[0].StartOvershootPP)
	}
	failing := func(ident.Data) (control.FOPDT, float64, error) { return control.FOPDT{}, 0, errors.New("boom") }
	if _, err := Compare(sim.Reference(), Options{Identify: failing}); err == nil {
		t.Fatal("identification failure: no error")
	}
}

func TestReportJSONContract(t *testing.T) {
	s := sim.Reference()
	s.Duration = 30 * time.Minute // the disturbance and the setpoint change never happen
	rep, err := Compare(s, Options{Controllers: []string{Fixed, PIAWSPFF}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "model", "loop_dead_time_s", "iae_bound", "results"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report has no %q: %s", k, b)
		}
	}
	model := m["model"].(map[string]any)
	for _, k := range []string{"gain", "tau_s", "dead_time_s", "base"} {
		if _, ok := model[k]; !ok {
			t.Errorf("model has no %q", k)
		}
	}
	res := m["results"].([]any)[1].(map[string]any)
	for _, k := range []string{"controller", "iae", "iae_ratio", "start_overshoot_pp", "violation_s", "settling_s", "processed", "lost", "max_cpu"} {
		if _, ok := res[k]; !ok {
			t.Errorf("result has no %q", k)
		}
	}
	st := res["settling_s"].(map[string]any)
	if st["disturbance"] != nil || st["setpoint"] != nil {
		t.Errorf("settling %v: events outside the run must be null", st)
	}
	if st["start"] == nil {
		t.Errorf("settling %v: the start settles within 30 min", st)
	}
}

func TestParseControllers(t *testing.T) {
	got, err := ParseControllers("pi, smith,pi")
	if err != nil || len(got) != 2 || got[0] != PI || got[1] != Smith {
		t.Fatalf("ParseControllers = %v, %v", got, err)
	}
	for _, bad := range []string{"", "pi,foo", ","} {
		if _, err := ParseControllers(bad); err == nil {
			t.Errorf("ParseControllers(%q): no error", bad)
		}
	}
}

// TestNoWindupAgainstAnEmptyQueue: producers slower than the setpoint needs
// leave the queue empty; the controller must not wind its rate up to the
// maximum (which a burst of messages would then hit at full speed).
func TestNoWindupAgainstAnEmptyQueue(t *testing.T) {
	s := sim.Reference()
	s.ProducerRate, s.Backlog = 500, 0
	rep, err := Compare(s, Options{Controllers: []string{PI, PIAWSPFF}})
	if err != nil {
		t.Fatal(err)
	}
	peak := func(r Result) float64 {
		m := 0.0
		for _, a := range r.Series.Allowed {
			m = max(m, a)
		}
		return m
	}
	pi, best := byName(t, rep)[PI], byName(t, rep)[PIAWSPFF]
	if p := peak(pi); p < s.MaxRate {
		t.Fatalf("plain pi peaked at %v; expected it to wind up to %v (the test's premise)", p, s.MaxRate)
	}
	// 1200 messages/s hold 70 % on the nominal plant.
	if p := peak(best); p > 1300 {
		t.Fatalf("%s allowed up to %v messages/s against an empty queue; want at most about the 1200 that hold the setpoint", PIAWSPFF, p)
	}
	if best.Lost != 0 {
		t.Fatalf("lost %d", best.Lost)
	}
}
