package sim

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func TestReferenceIAEBound(t *testing.T) {
	s := Reference()
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	// Loop dead time 5 + 30 + 90 + 30 = 155 s; events 60 + 20 + 20 + 20.
	if got := s.LoopDeadTime(s.Plant.DeadTime); got != 155*time.Second {
		t.Fatalf("LoopDeadTime = %v; want 155s", got)
	}
	if got := s.IAEBound(); got != 120*155 {
		t.Fatalf("IAEBound = %v; want %v", got, 120*155)
	}
}

func TestPlantSteadyStateAndSaturation(t *testing.T) {
	s := Reference()
	p := NewPlant(s.Plant, time.Second, 0)
	var y float64
	for range 300 {
		y = p.Step(1200, 0)
	}
	if math.Abs(y-70) > 1e-6 {
		t.Fatalf("CPU at 1200 msg/s = %v; want 10 + 0.05 x 1200 = 70", y)
	}
	if y = p.Step(1200, 50); y != 100 {
		t.Fatalf("CPU with a 50-point disturbance = %v; want saturated at 100", y)
	}
	q := NewPlant(s.Plant, time.Second, 0)
	for k := range 5 {
		if y := q.Step(1000, 0); y != 10 {
			t.Fatalf("second %d: CPU %v moved before the 5 s dead time", k, y)
		}
	}
}

func TestPipelinePublishesAveragesLate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	p := NewPipeline(time.Minute, 90*time.Second, 0, rng, 10)
	if dp, ok := p.Latest(); !ok || dp.Value != 10 || dp.End() > 0 {
		t.Fatalf("history at t=0: %+v %v; want a datapoint of the steady 10 %% from before the start", dp, ok)
	}
	for k := range 120 {
		tt := time.Duration(k) * time.Second
		p.Publish(tt)
		y := 20.0
		if k >= 60 {
			y = 40
		}
		p.Observe(tt, time.Second, y)
	}
	// The period [0, 60s) ended at 60 s and is published at 150 s.
	p.Publish(149 * time.Second)
	if dp, _ := p.Latest(); dp.Start == 0 {
		t.Fatalf("period [0, 60s) visible at 149 s; want it published at 150 s")
	}
	p.Publish(150 * time.Second)
	if dp, _ := p.Latest(); dp.Start != 0 || dp.Value != 20 || dp.Published != 150*time.Second {
		t.Fatalf("at 150 s: %+v; want the average 20 of [0, 60s)", dp)
	}
	p.Publish(210 * time.Second)
	if dp, _ := p.Latest(); dp.Start != time.Minute || dp.Value != 40 {
		t.Fatalf("at 210 s: %+v; want the average 40 of [60s, 120s)", dp)
	}
}

func TestRunDeterministicAndNoLoss(t *testing.T) {
	s := Reference()
	s.Noise, s.Duration = 1, 30*time.Minute
	policy := func() Policy {
		return PolicyFunc(func(o Observation) float64 {
			if !o.OK {
				return 0
			}
			return math.Max(0, 1200+20*(o.Setpoint-o.Datapoint.Value))
		})
	}
	a, err := Run(s, policy())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(s, policy())
	if !reflect.DeepEqual(a.Metrics, b.Metrics) || !reflect.DeepEqual(a.Series.Allowed, b.Series.Allowed) {
		t.Fatal("two runs with the same seed differ")
	}
	s.Seed++
	c, _ := Run(s, policy())
	if reflect.DeepEqual(a.Series.Allowed, c.Series.Allowed) {
		t.Fatal("runs with different seeds are identical: the noise is not seeded")
	}
	if a.Metrics.Lost != 0 || a.Counts.Lost() != 0 {
		t.Fatalf("lost %d; want 0 (%+v)", a.Metrics.Lost, a.Counts)
	}
	if a.Counts.Produced != s.Backlog+int64(s.ProducerRate*s.Duration.Seconds()) {
		t.Fatalf("produced %d; want backlog + 1500/s x 1800 s", a.Counts.Produced)
	}
	if a.Counts.Processed == 0 {
		t.Fatal("nothing processed")
	}
}

func TestLossyConsumerIsDetected(t *testing.T) {
	s := Reference()
	s.Duration = 10 * time.Minute
	r, err := run(s, PolicyFunc(func(Observation) float64 { return 1000 }), runOptions{dropEvery: 7})
	if err != nil {
		t.Fatal(err)
	}
	if r.Metrics.Lost <= 0 {
		t.Fatalf("a consumer that drops every 7th batch: lost = %d; want > 0", r.Metrics.Lost)
	}
	// About one batch of 1000 in 7 is lost.
	want := int64(600 / 7 * 1000)
	if math.Abs(float64(r.Metrics.Lost-want)) > 2000 {
		t.Fatalf("lost %d; want about %d", r.Metrics.Lost, want)
	}
}

func TestConsumersLimitedByQueue(t *testing.T) {
	s := Reference()
	s.Backlog, s.ProducerRate, s.Duration = 0, 100, 5*time.Minute
	r, err := Run(s, PolicyFunc(func(Observation) float64 { return 3000 }))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Series.Processed[len(r.Series.Processed)-1]; got > 100 {
		t.Fatalf("processed %v msg/s with producers at 100/s and no backlog; want at most 100", got)
	}
	if r.Metrics.Lost != 0 {
		t.Fatalf("lost %d", r.Metrics.Lost)
	}
}

func TestStepTest(t *testing.T) {
	s := Reference()
	d, err := RunStepTest(s, StepTest{From: 0, To: 1000, At: 10 * time.Minute, Duration: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("step test data invalid for identification: %v", err)
	}
	if d.Len() != 30 || d.T[0] != 30 || d.Y[0] != 10 {
		t.Fatalf("step test: %d samples from t=%v y=%v; want 30 from t=30 s at 10 %%", d.Len(), d.T[0], d.Y[0])
	}
	if y := d.Y[d.Len()-1]; math.Abs(y-60) > 1e-6 {
		t.Fatalf("final CPU %v; want 10 + 0.05 x 1000 = 60", y)
	}
	for _, bad := range []StepTest{{From: 1, To: 1, At: time.Minute, Duration: time.Hour}, {From: 0, To: 1, At: 0, Duration: time.Hour},
		{From: math.NaN(), To: 1, At: time.Minute, Duration: time.Hour}, {From: 0, To: 1, At: time.Hour, Duration: time.Minute}} {
		if _, err := RunStepTest(s, bad); err == nil {
			t.Errorf("step test %+v: no error", bad)
		}
	}
}

func TestScenarioValidate(t *testing.T) {
	for name, mut := range map[string]func(*Scenario){
		"gain":     func(s *Scenario) { s.Plant.Gain = 0 },
		"period":   func(s *Scenario) { s.MetricPeriod = 0 },
		"tick":     func(s *Scenario) { s.Tick = -time.Second },
		"setpoint": func(s *Scenario) { s.Setpoint = math.NaN() },
		"base":     func(s *Scenario) { s.Plant.Base = 100 },
		"max rate": func(s *Scenario) { s.MaxRate = 0 },
		"noise":    func(s *Scenario) { s.Noise = math.Inf(1) },
		"change":   func(s *Scenario) { s.SetpointChanges = []SetpointChange{{At: time.Minute, Value: 120}} },
		"dist":     func(s *Scenario) { s.Disturbances = []Disturbance{{At: time.Minute, Duration: 0, Size: 1}} },
	} {
		s := Reference()
		mut(&s)
		if s.Validate() == nil {
			t.Errorf("%s: valid; want an error", name)
		}
	}
}
