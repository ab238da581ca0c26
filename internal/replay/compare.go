package replay

import (
	"fmt"

	"github.com/sluice-dev/sluice/pkg/control"
)

// Verdict thresholds.
const (
	// MinFit is the least fit (percent) of the live replay's measured
	// signal to the record for the comparison to be trusted.
	MinFit = 70.0
	// PromoteBelow is the largest shadow/live IAE ratio that promotes.
	PromoteBelow = 0.95
	// MaxExtraOvershoot is how many more points of overshoot than the live
	// gains a promoted shadow may have.
	MaxExtraOvershoot = 1.0
)

// Report is a shadow's counterfactual comparison with the live gains.
type Report struct {
	Ticks int `json:"ticks"`
	// Fit is how well the live gains' replay reproduces the record.
	Fit    Fit `json:"fit"`
	Live   Run `json:"live"`
	Shadow Run `json:"shadow"`
	// IAERatio and RateTVRatio are shadow over live.
	IAERatio    float64 `json:"iae_ratio"`
	RateTVRatio float64 `json:"rate_tv_ratio"`
	// Verdict is promote or keep, and Reason says why.
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// Compare replays the live and the shadow controllers on the record and
// gives the verdict.
func Compare(tr Trace, p Plant, live, shadow control.Config) (Report, error) {
	d := Disturbance(tr, p)
	lr, err := Simulate(tr, d, live, p)
	if err != nil {
		return Report{}, fmt.Errorf("live gains: %w", err)
	}
	sr, err := Simulate(tr, d, shadow, p)
	if err != nil {
		return Report{}, fmt.Errorf("shadow gains: %w", err)
	}
	r := Report{Ticks: tr.Len(), Fit: FitOf(tr, lr), Live: lr, Shadow: sr,
		IAERatio: sr.IAE / lr.IAE, RateTVRatio: sr.RateTV / lr.RateTV}
	r.Verdict, r.Reason = verdict(r)
	return r, nil
}

func verdict(r Report) (string, string) {
	switch {
	case !(r.Fit.Measured >= MinFit):
		return "keep", fmt.Sprintf("the replay of the live gains does not reproduce the record (fit %.0f %%, need %.0f %%): the model or the replay is off, the comparison is not trusted", r.Fit.Measured, MinFit)
	case !(r.IAERatio <= PromoteBelow):
		return "keep", fmt.Sprintf("the shadow's IAE is %.2f times the live gains' (promote below %.2f)", r.IAERatio, PromoteBelow)
	case r.Shadow.Overshoot > r.Live.Overshoot+MaxExtraOvershoot:
		return "keep", fmt.Sprintf("the shadow overshoots by %.1f points, the live gains by %.1f", r.Shadow.Overshoot, r.Live.Overshoot)
	}
	return "promote", fmt.Sprintf("the shadow's IAE is %.2f times the live gains' with %.1f points of overshoot (live %.1f)", r.IAERatio, r.Shadow.Overshoot, r.Live.Overshoot)
}
