package lab

import (
	"testing"

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
	got, err := tuning.TuneProduct(s.Plant, s.PipelineDelay(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Kp != cfg.Kp || got.Ki != cfg.Ki || got.SetpointFilter != cfg.SetpointFilter || got.NoiseBand != cfg.NoiseBand || got.Feedforward != *cfg.Feedforward {
		t.Fatalf("TuneProduct = %+v; want the lab's kp %v ki %v filter %v band %v ff %+v", got, cfg.Kp, cfg.Ki, cfg.SetpointFilter, cfg.NoiseBand, *cfg.Feedforward)
	}
}
