package tuning

import (
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

func TestTrustedSetpointFilter(t *testing.T) {
	loop := LoopModel(control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}, 150*time.Second)
	full := SetpointFilter(loop)
	if full != 62500*time.Millisecond {
		t.Fatalf("SetpointFilter(reference loop) = %v; want 62.5s (half the loop dead time, 155 s, less the lag)", full)
	}
	for _, c := range []struct {
		modelErr float64
		want     time.Duration
	}{
		{0, 0}, {0.02, 0}, {0.06, full / 2}, {0.10, full}, {0.5, full}, {math.NaN(), full},
	} {
		if got := TrustedSetpointFilter(loop, c.modelErr); (got - c.want).Abs() > time.Microsecond {
			t.Errorf("TrustedSetpointFilter(loop, %v) = %v; want %v", c.modelErr, got, c.want)
		}
	}
}

func TestTuneProduct(t *testing.T) {
	m := control.FOPDT{Gain: 0.05, Base: 10, Tau: 15 * time.Second, DeadTime: 5 * time.Second}
	p, err := TuneProduct(m, 150*time.Second, 1, 0.01)
	if err != nil {
		t.Fatal(err)
	}
	// Ki = 1 / (gain x 3/4 x 155 s); SIMC's Kp on the loop model; the
	// noise band 3 x the noise; no filter for a model within 2 %.
	if math.Abs(p.Ki-1/(0.05*116.25)) > 1e-9 || p.NoiseBand != 3 || p.SetpointFilter != 0 || p.Feedforward != m || !(p.Kp > 0) {
		t.Fatalf("TuneProduct = %+v; want ki %v, noise band 3, no filter, the model as feedforward", p, 1/(0.05*116.25))
	}
	for _, bad := range [][3]float64{{-1, 1, 0}, {150, -1, 0}, {150, 1, -0.1}} {
		if _, err := TuneProduct(m, time.Duration(bad[0])*time.Second, bad[1], bad[2]); err == nil {
			t.Errorf("TuneProduct(pipeline %vs, noise %v, error %v) = nil error; want one", bad[0], bad[1], bad[2])
		}
	}
}
