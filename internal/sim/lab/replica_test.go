package lab

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

func signal(t *testing.T, r Result, name string) sim.SignalMetrics {
	t.Helper()
	for _, s := range r.Signals {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("%s: no signal %q in %+v", r.Controller, name, r.Signals)
	return sim.SignalMetrics{}
}

// TestAcceptanceReplicaLag is the lab's acceptance of override control: on the
// replica-lag scenario the override loop holds the lag's mean after settling
// within 10 % of its setpoint while the CPU stays at or below its setpoint +
// 2, and the CPU-only loop lets the lag grow to at least 5 x its setpoint.
func TestAcceptanceReplicaLag(t *testing.T) {
	s := sim.ReplicaLagScenario()
	rep, err := Compare(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := byName(t, rep)
	if len(rep.Results) != 2 || r[PIAWSPFF].Controller == "" || r[Override].Controller == "" {
		t.Fatalf("results %v; want the defaults %s and %s", Controllers(), PIAWSPFF, Override)
	}
	ov := r[Override]
	lag, cpu := signal(t, ov, sim.SignalLag), signal(t, ov, sim.SignalCPU)
	sp := s.Replica.Setpoint
	if lag.Setpoint != sp || math.Abs(lag.MeanAfterSettle-sp) > 0.1*sp {
		t.Errorf("override: lag %+v; want mean after settling within 10 %% of %v s", lag, sp)
	}
	if cpu.Max > s.Setpoint+2 {
		t.Errorf("override: CPU max %.2f; want <= %v", cpu.Max, s.Setpoint+2)
	}
	if ov.LimitingSwitches < 1 || lag.LimitingS == 0 || ov.Lost != 0 {
		t.Errorf("override: %d switches, lag limited %v s, lost %d; want the lag to take over, nothing lost", ov.LimitingSwitches, lag.LimitingS, ov.Lost)
	}
	only := signal(t, r[PIAWSPFF], sim.SignalLag)
	if only.Max < 5*sp {
		t.Errorf("cpu-only: lag max %.1f s; want >= 5 x %v", only.Max, sp)
	}
	if r[PIAWSPFF].LimitingSwitches != 0 || signal(t, r[PIAWSPFF], sim.SignalCPU).LimitingS != s.Duration.Seconds() {
		t.Errorf("cpu-only: %+v; want the CPU limiting throughout", r[PIAWSPFF].Signals)
	}
	t.Logf("override: cpu %+v lag %+v switches %d; cpu-only lag %+v", cpu, lag, ov.LimitingSwitches, only)
}

// TestOverrideLagAtFloorDoesNotLimit: a replica that keeps up shows a lag of
// 0, which says nothing of how much more it could take: the override loop
// then runs exactly as the CPU loop alone, the CPU limiting throughout.
func TestOverrideLagAtFloorDoesNotLimit(t *testing.T) {
	s := sim.ReplicaLagScenario()
	s.Replica.Capacity = 2000 // above the 1,200 messages/s of the CPU setpoint
	s.Duration = 60 * time.Minute
	rep, err := Compare(s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := byName(t, rep)
	ov, only := r[Override].Series, r[PIAWSPFF].Series
	for i := range ov.T {
		if ov.Allowed[i] != only.Allowed[i] || ov.Limiting[i] != sim.SignalCPU {
			t.Fatalf("t=%v s: override allows %v (%s limiting), the CPU loop alone %v; want the same, the CPU limiting",
				ov.T[i], ov.Allowed[i], ov.Limiting[i], only.Allowed[i])
		}
	}
	if m := rep.ReplicaModel; m == nil || math.Abs(m.Capacity-2000) > 1 {
		t.Fatalf("replica model %+v; want the step test to find 2000 messages/s", m)
	}
}

func TestLagGains(t *testing.T) {
	// 1,000 messages/s, 150 s: Kp = 1000/300, Ti = 1200 s.
	kp, ki := LagGains(1000, 150*time.Second)
	if math.Abs(kp-1000.0/300) > 1e-12 || math.Abs(ki-kp/1200) > 1e-12 {
		t.Fatalf("LagGains = %v, %v; want %v, %v", kp, ki, 1000.0/300, 1000.0/300/1200)
	}
	if got := LagDeadTime(sim.ReplicaLagScenario()); got != 150*time.Second {
		t.Fatalf("LagDeadTime = %v; want 30 + 90 + 30 s", got)
	}
}

func TestOverrideNeedsAReplica(t *testing.T) {
	if _, err := Compare(sim.Reference(), Options{Controllers: []string{Override}}); err == nil {
		t.Fatal("override ran on a scenario without a replica")
	}
	if got := DefaultControllers(sim.Reference()); len(got) != len(Controllers()) {
		t.Fatalf("defaults without a replica: %v; want %v", got, Controllers())
	}
}
