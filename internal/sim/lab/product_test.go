package lab

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/tuning"
)

// The product's tuning rule (pkg/tuning, what `sluice tune --from-history`
// proposes) is the lab's pi-aw-spf-ff, so that a proposal runs the
// controller the lab measured.
func TestTuneProductIsTheLabsController(t *testing.T) {
	s := sim.Reference()
	p := Plant{Model: s.Plant, NoiseSD: 1}
	cfg, _, err := ControllerConfig(PIAWSPFF, s, p, Gains{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := tuning.TuneProduct(s.Plant, s.PipelineDelay(), 1, math.NaN())
	if err != nil {
		t.Fatal(err)
	}
	// The lab's controller adapts its gain online (AdaptGain), which
	// lets its integrator be faster than the product's default: Tc is half
	// the loop dead time instead of three quarters.
	if !cfg.AdaptGain || math.Abs(got.Ki*3/2-cfg.Ki) > 1e-12*cfg.Ki {
		t.Fatalf("lab ki %v (adapt %v); want TuneProduct's %v x 3/2 with AdaptGain", cfg.Ki, cfg.AdaptGain, got.Ki)
	}
	if got.Kp != cfg.Kp || got.SetpointFilter != cfg.SetpointFilter || got.NoiseBand != cfg.NoiseBand || got.Feedforward != *cfg.Feedforward {
		t.Fatalf("TuneProduct = %+v; want the lab's kp %v ki %v filter %v band %v ff %+v", got, cfg.Kp, cfg.Ki, cfg.SetpointFilter, cfg.NoiseBand, *cfg.Feedforward)
	}
}

// The setpoint filter trusts the model as much as the step test's residual
// says: none for the noiseless reference's exact fit, the whole filter for
// an unknown or poor one.
func TestSetpointFilterTrustsTheModel(t *testing.T) {
	s := sim.Reference()
	m, mv, err := Identify(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	loop := tuning.LoopModel(m, s.PipelineDelay())
	for _, c := range []struct {
		name string
		p    Plant
		want time.Duration
	}{
		{"exact fit", IdentifiedPlant(m, mv), 0},
		{"unknown", Plant{Model: m}, tuning.SetpointFilter(loop)},
		{"poor fit", Plant{Model: m, ModelError: 0.2, ModelErrorKnown: true}, tuning.SetpointFilter(loop)},
		{"between", Plant{Model: m, ModelError: 0.06, ModelErrorKnown: true}, tuning.SetpointFilter(loop) / 2},
	} {
		cfg, _, err := ControllerConfig(PIAWSPFF, s, c.p, Gains{})
		if err != nil {
			t.Fatal(err)
		}
		if d := cfg.SetpointFilter - c.want; d > time.Millisecond || d < -time.Millisecond {
			t.Errorf("%s: setpoint filter %v; want %v", c.name, cfg.SetpointFilter, c.want)
		}
	}
}
