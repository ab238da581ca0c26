// Package tuning computes PI and PID gains from a first-order-plus-dead-time
// model (control.FOPDT) by the classic rules:
//
//   - SIMC, Skogestad's simple IMC rule (S. Skogestad, "Simple analytic rules
//     for model reduction and PID controller tuning", J. Process Control 13
//     (2003) 291-309), the default. Its PID form adds the derivative time
//     theta/3 of the "improved" SIMC rule (C. Grimholt and S. Skogestad,
//     "Optimal PI and PID control of first-order plus delay processes and
//     evaluation of the original and improved SIMC rules", J. Process Control
//     70 (2018) 36-46).
//   - IMC or lambda tuning (D. E. Rivera, M. Morari and S. Skogestad,
//     "Internal model control. 4. PID controller design", Ind. Eng. Chem.
//     Process Des. Dev. 25 (1986) 252-265).
//   - Ziegler-Nichols' reaction-curve rule (J. G. Ziegler and N. B. Nichols,
//     "Optimum settings for automatic controllers", Trans. ASME 64 (1942)
//     759-768).
//   - Cohen-Coon (G. H. Cohen and G. A. Coon, "Theoretical consideration of
//     retarded control", Trans. ASME 75 (1953) 827-834).
//
// Gains are in the ideal parallel form u = Kp e + Ki integral(e) + Kd de/dt,
// with Ki = Kp/Ti and Kd = Kp*Td; rules stated in the series form are
// converted. With the plant gain in points of CPU per msg/s, Kp is in
// (msg/s) per point, Ki in (msg/s) per point-second and Kd in msg per
// point ((msg/s)·s per point).
package tuning

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// Rule names a tuning rule.
type Rule string

// The tuning rules.
const (
	SIMC           Rule = "simc"
	IMC            Rule = "imc"
	ZieglerNichols Rule = "zn"
	CohenCoon      Rule = "cc"
)

// Rules lists the rules, default first.
func Rules() []Rule { return []Rule{SIMC, IMC, ZieglerNichols, CohenCoon} }

// ParseRule returns the rule named s (simc, imc, zn or cc; "lambda",
// "ziegler-nichols" and "cohen-coon" are accepted too).
func ParseRule(s string) (Rule, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "simc", "":
		return SIMC, nil
	case "imc", "lambda":
		return IMC, nil
	case "zn", "ziegler-nichols":
		return ZieglerNichols, nil
	case "cc", "cohen-coon":
		return CohenCoon, nil
	}
	return "", fmt.Errorf("unknown tuning rule %q: want simc, imc, zn or cc", s)
}

// Form is the controller structure to tune for.
type Form string

// The controller forms.
const (
	PI  Form = "pi"
	PID Form = "pid"
)

// ParseForm returns the form named s (pi or pid).
func ParseForm(s string) (Form, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "pi", "":
		return PI, nil
	case "pid":
		return PID, nil
	}
	return "", fmt.Errorf("unknown controller form %q: want pi or pid", s)
}

// Options adjust a rule.
type Options struct {
	// Form is PI (the default when empty) or PID.
	Form Form
	// TauC is the desired closed-loop time constant of SIMC and IMC (lambda).
	// Zero means the rule's recommended value: for SIMC the model's dead
	// time (tight and smooth control, Skogestad 2003); for IMC the lower
	// bound that Rivera et al. (1986) recommend for robustness,
	// max(1.7 theta, 0.2 tau) for PI and max(0.8 theta, 0.2 tau) for PID.
	TauC time.Duration
}

// Gains are the tuned controller parameters in the ideal parallel form. In
// JSON they are {"rule","form","kp","ki","kd","ti_s","td_s"}, with Ti and Td
// in seconds.
type Gains struct {
	Rule Rule
	Form Form
	// Kp is the proportional gain (output units per measurement unit):
	// (msg/s) per point.
	Kp float64
	// Ki = Kp/Ti, (msg/s) per point-second.
	Ki float64
	// Kd = Kp*Td, msg per point ((msg/s)·s per point).
	Kd float64
	// Ti is the integral time. A pure integral controller (SIMC on a model
	// without lag, PI form) has Kp and Ti zero and Ki positive.
	Ti time.Duration
	// Td is the derivative time (zero for PI).
	Td time.Duration
}

// gainsJSON is the JSON form of Gains.
type gainsJSON struct {
	Rule Rule    `json:"rule"`
	Form Form    `json:"form"`
	Kp   float64 `json:"kp"`
	Ki   float64 `json:"ki"`
	Kd   float64 `json:"kd"`
	Ti   float64 `json:"ti_s"`
	Td   float64 `json:"td_s"`
}

// MarshalJSON writes g as {"rule","form","kp","ki","kd","ti_s","td_s"}.
func (g Gains) MarshalJSON() ([]byte, error) {
	return json.Marshal(gainsJSON{g.Rule, g.Form, g.Kp, g.Ki, g.Kd, g.Ti.Seconds(), g.Td.Seconds()})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (g *Gains) UnmarshalJSON(b []byte) error {
	var j gainsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return fmt.Errorf("tuning gains: %w", err)
	}
	*g = Gains{Rule: j.Rule, Form: j.Form, Kp: j.Kp, Ki: j.Ki, Kd: j.Kd, Ti: seconds(j.Ti), Td: seconds(j.Td)}
	return nil
}

// Tune returns the gains that rule gives for model m.
func Tune(m control.FOPDT, rule Rule, opt Options) (Gains, error) {
	if err := m.Validate(); err != nil {
		return Gains{}, fmt.Errorf("tune %s: %w", rule, err)
	}
	if opt.TauC < 0 {
		return Gains{}, fmt.Errorf("tune %s: closed-loop time constant %v must not be negative", rule, opt.TauC)
	}
	form := opt.Form
	if form == "" {
		form = PI
	}
	if form != PI && form != PID {
		return Gains{}, fmt.Errorf("tune %s: unknown controller form %q: want pi or pid", rule, form)
	}
	p := plant{k: m.Gain, tau: m.Tau.Seconds(), theta: m.DeadTime.Seconds(), tauC: opt.TauC, model: m}
	var t terms
	var err error
	switch rule {
	case SIMC:
		if p.tau+p.simcTauC()+p.theta > 0 && p.tau == 0 {
			return simcIntegral(p, form), nil
		}
		t, err = simc(p, form)
	case IMC:
		t, err = imc(p, form)
	case ZieglerNichols:
		t, err = zieglerNichols(p, form)
	case CohenCoon:
		t, err = cohenCoon(p, form)
	default:
		return Gains{}, fmt.Errorf("unknown tuning rule %q: want simc, imc, zn or cc", rule)
	}
	if err != nil {
		return Gains{}, err
	}
	return Gains{Rule: rule, Form: form, Kp: t.kc, Ki: t.kc / t.ti, Kd: t.kc * t.td, Ti: seconds(t.ti), Td: seconds(t.td)}, nil
}

// plant is the model a rule tunes for, in seconds.
type plant struct {
	k, tau, theta float64
	tauC          time.Duration
	model         control.FOPDT
}

// terms are a rule's result: gain, integral and derivative time (seconds).
type terms struct{ kc, ti, td float64 }

// simcTauC is SIMC's closed-loop time constant: tau_c, or the dead time.
func (p plant) simcTauC() float64 {
	if p.tauC == 0 {
		return p.theta
	}
	return p.tauC.Seconds()
}

// simcIntegral is SIMC for a pure delay: pure integral control with
// Ki = 1/(k (tau_c + theta)), the limit Kp -> 0 of a PI with Kp/Ti fixed.
func simcIntegral(p plant, form Form) Gains {
	ki := 1 / (p.k * (p.simcTauC() + p.theta))
	g := Gains{Rule: SIMC, Form: form, Ki: ki}
	if form == PID {
		// Improved SIMC: serial derivative theta/3 on the integrator gives
		// Kp = Ki*theta/3, no Kd.
		g.Kp = ki * p.theta / 3
		g.Ti = seconds(p.theta / 3)
	}
	return g
}

func simc(p plant, form Form) (terms, error) {
	tc, tau, theta := p.simcTauC(), p.tau, p.theta
	if tau+tc+theta <= 0 {
		return terms{}, fmt.Errorf("tune simc: time constant, dead time and tau_c are all zero: give --tauc or a model with dynamics")
	}
	// Skogestad (2003), eq. (27)-(28): Kc = tau/(k (tau_c+theta)),
	// tau_I = min(tau, 4 (tau_c+theta)).
	t := terms{kc: tau / (p.k * (tc + theta)), ti: min(tau, 4*(tc+theta))}
	if form == PID && theta > 0 {
		// Grimholt & Skogestad (2018): series tau_D = theta/3; convert
		// series (kc, ti, td) to parallel.
		tds := theta / 3
		t = terms{t.kc * (1 + tds/t.ti), t.ti + tds, t.ti * tds / (t.ti + tds)}
	}
	return t, nil
}

func imc(p plant, form Form) (terms, error) {
	tau, theta := p.tau, p.theta
	lambda := p.tauC.Seconds()
	if p.tauC == 0 {
		lambda = max(1.7*theta, 0.2*tau)
		if form == PID {
			lambda = max(0.8*theta, 0.2*tau)
		}
	}
	var t terms
	switch form {
	case PI:
		// Rivera et al. (1986), PI for FOPDT (first-order Pade):
		// Kc = tau/(k (lambda+theta)), tau_I = tau.
		t = terms{kc: tau / (p.k * (lambda + theta)), ti: tau}
	case PID:
		// Rivera et al. (1986), PID: Kc = (tau+theta/2)/(k (lambda+theta/2)),
		// tau_I = tau+theta/2, tau_D = tau theta/(2 tau+theta).
		t = terms{kc: (tau + theta/2) / (p.k * (lambda + theta/2)), ti: tau + theta/2}
		if t.ti > 0 {
			t.td = tau * theta / (2*tau + theta)
		}
	}
	if t.ti <= 0 {
		return terms{}, fmt.Errorf("tune imc: the model has no time constant, so IMC gives no integral time: use simc")
	}
	return t, nil
}

func zieglerNichols(p plant, form Form) (terms, error) {
	if p.theta <= 0 {
		return terms{}, fmt.Errorf("tune zn: the reaction-curve rule needs a positive dead time (the model has none)")
	}
	if p.tau <= 0 {
		return terms{}, fmt.Errorf("tune zn: the reaction-curve rule needs a positive time constant (the model has none)")
	}
	a := p.k * p.theta / p.tau
	if form == PID { // Kc = 1.2/a, Ti = 2 theta, Td = theta/2.
		return terms{1.2 / a, 2 * p.theta, p.theta / 2}, nil
	}
	return terms{kc: 0.9 / a, ti: 3 * p.theta}, nil // Kc = 0.9/a, Ti = 3 theta (Ziegler & Nichols 1942).
}

func cohenCoon(p plant, form Form) (terms, error) {
	theta := p.theta
	if theta <= 0 || p.tau <= 0 {
		return terms{}, fmt.Errorf("tune cc: Cohen-Coon needs a positive time constant and dead time (model has %v and %v)", p.model.Tau, p.model.DeadTime)
	}
	r := theta / p.tau
	if form == PID { // Kc = (1/k)(tau/theta)(4/3 + r/4), Ti = theta (32+6r)/(13+8r), Td = 4 theta/(11+2r).
		return terms{(4.0/3 + r/4) / (p.k * r), theta * (32 + 6*r) / (13 + 8*r), 4 * theta / (11 + 2*r)}, nil
	}
	// Kc = (1/k)(tau/theta)(0.9 + r/12), Ti = theta (30+3r)/(9+20r).
	return terms{kc: (0.9 + r/12) / (p.k * r), ti: theta * (30 + 3*r) / (9 + 20*r)}, nil
}

// LoopModel returns the model the controller sees: the plant's model with
// the measurement and sampling delay of the loop added to its dead time. A
// step test on the plant identifies the plant; the metric pipeline's delay
// (metric period / 2 + publication delay + tick / 2, see docs/architecture.md) is known
// configuration and is added here before tuning.
func LoopModel(plant control.FOPDT, extraDelay time.Duration) control.FOPDT {
	plant.DeadTime += extraDelay
	return plant
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second))
}
