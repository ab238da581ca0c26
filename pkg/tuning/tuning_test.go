package tuning

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
)

// The lab's reference plant: k = 0.05 points per message/s,
// tau = 15 s, theta = 5 s.
var reference = control.FOPDT{Gain: 0.05, Tau: 15 * time.Second, DeadTime: 5 * time.Second, Base: 10}

func TestTune(t *testing.T) {
	// Every want is computed by hand from the rule's formula (see the
	// comments), not by this package.
	tests := []struct {
		name   string
		m      control.FOPDT
		rule   Rule
		opt    Options
		kp, ti float64 // ti in seconds
		td     float64
	}{
		// Kc = 15/(0.05 (5+5)) = 30, Ti = min(15, 4*10) = 15.
		{"simc pi", reference, SIMC, Options{}, 30, 15, 0},
		// tau_c = 20: Kc = 15/(0.05*25) = 12, Ti = min(15, 100) = 15.
		{"simc pi tauc", reference, SIMC, Options{TauC: 20 * time.Second}, 12, 15, 0},
		// tau = 60, theta = 5: Kc = 60/(0.05*10) = 120, Ti = min(60, 40) = 40.
		{"simc pi lag dominant", control.FOPDT{Gain: 0.05, Tau: time.Minute, DeadTime: 5 * time.Second}, SIMC, Options{}, 120, 40, 0},
		// The loop seen through CloudWatch: theta = 5+30+90+30 = 155 s,
		// Kc = 15/(0.05*310), Ti = 15.
		{"simc pi loop delay", LoopModel(reference, 150*time.Second), SIMC, Options{}, 15 / (0.05 * 310), 15, 0},
		// Series Kc = 30, tau_I = 15, tau_D = 5/3; parallel Kp = 30 (1 + 1/9),
		// Ti = 15 + 5/3, Td = 15 (5/3) / (50/3) = 1.5.
		{"simc pid", reference, SIMC, Options{Form: PID}, 100.0 / 3, 50.0 / 3, 1.5},
		// lambda = max(1.7*5, 0.2*15) = 8.5: Kc = 15/(0.05*13.5), Ti = 15.
		{"imc pi", reference, IMC, Options{}, 15 / (0.05 * 13.5), 15, 0},
		// lambda = 10: Kc = 15/(0.05*15) = 20.
		{"imc pi lambda", reference, IMC, Options{TauC: 10 * time.Second}, 20, 15, 0},
		// lambda = 10: Kc = 17.5/(0.05*12.5) = 28, Ti = 17.5, Td = 75/35.
		{"imc pid lambda", reference, IMC, Options{Form: PID, TauC: 10 * time.Second}, 28, 17.5, 75.0 / 35},
		// a = k theta/tau = 1/60: Kc = 0.9*60 = 54, Ti = 3*5 = 15.
		{"zn pi", reference, ZieglerNichols, Options{}, 54, 15, 0},
		// Kc = 1.2*60 = 72, Ti = 10, Td = 2.5.
		{"zn pid", reference, ZieglerNichols, Options{Form: PID}, 72, 10, 2.5},
		// r = 1/3: Kc = 60 (0.9 + 1/36) = 55.666..., Ti = 5*31/(9+20/3) = 465/47.
		{"cc pi", reference, CohenCoon, Options{}, 167.0 / 3, 465.0 / 47, 0},
		// Kc = 60 (4/3 + 1/12) = 85, Ti = 5*34/(13+8/3) = 510/47, Td = 20/(35/3) = 12/7.
		{"cc pid", reference, CohenCoon, Options{Form: PID}, 85, 510.0 / 47, 12.0 / 7},
	}
	close := func(got, want float64) bool { return math.Abs(got-want) <= 1e-6*math.Max(1, math.Abs(want)) }
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Tune(tc.m, tc.rule, tc.opt)
			if err != nil {
				t.Fatalf("Tune: %v", err)
			}
			if !close(g.Kp, tc.kp) || !close(g.Ti.Seconds(), tc.ti) || !close(g.Td.Seconds(), tc.td) {
				t.Errorf("Tune(%s, %+v) = Kp %v, Ti %v, Td %v; want %v, %vs, %vs", tc.rule, tc.opt, g.Kp, g.Ti, g.Td, tc.kp, tc.ti, tc.td)
			}
			if !close(g.Ki, tc.kp/tc.ti) || !close(g.Kd, tc.kp*tc.td) {
				t.Errorf("Tune(%s, %+v) Ki, Kd = %v, %v; want Kp/Ti = %v, Kp*Td = %v", tc.rule, tc.opt, g.Ki, g.Kd, tc.kp/tc.ti, tc.kp*tc.td)
			}
			if g.Rule != tc.rule {
				t.Errorf("Tune rule = %q; want %q", g.Rule, tc.rule)
			}
		})
	}
}

func TestTunePureDelay(t *testing.T) {
	// SIMC on a pure delay is an integral controller, Ki = 1/(k (tau_c+theta)).
	m := control.FOPDT{Gain: 0.05, DeadTime: 10 * time.Second}
	g, err := Tune(m, SIMC, Options{})
	if err != nil {
		t.Fatalf("Tune: %v", err)
	}
	if g.Kp != 0 || math.Abs(g.Ki-1) > 1e-12 {
		t.Errorf("Tune(pure delay) = Kp %v, Ki %v; want 0, 1", g.Kp, g.Ki)
	}
}

func TestTuneErrors(t *testing.T) {
	tests := []struct {
		name string
		m    control.FOPDT
		rule Rule
		opt  Options
		want string
	}{
		{"zero gain", control.FOPDT{Tau: time.Second}, SIMC, Options{}, "gain"},
		{"negative tauc", reference, SIMC, Options{TauC: -time.Second}, "negative"},
		{"unknown rule", reference, Rule("foo"), Options{}, `unknown tuning rule "foo"`},
		{"unknown form", reference, SIMC, Options{Form: "pd"}, "unknown controller form"},
		{"zn without dead time", control.FOPDT{Gain: 1, Tau: time.Second}, ZieglerNichols, Options{}, "dead time"},
		{"cc without lag", control.FOPDT{Gain: 1, DeadTime: time.Second}, CohenCoon, Options{}, "time constant"},
		{"imc without lag", control.FOPDT{Gain: 1, DeadTime: time.Second}, IMC, Options{}, "no time constant"},
		{"simc static", control.FOPDT{Gain: 1}, SIMC, Options{}, "all zero"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Tune(tc.m, tc.rule, tc.opt)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Tune(%+v, %q, %+v) error = %v; want one containing %q", tc.m, tc.rule, tc.opt, err, tc.want)
			}
		})
	}
}

func TestParseRule(t *testing.T) {
	for in, want := range map[string]Rule{"simc": SIMC, "SIMC": SIMC, "lambda": IMC, "imc": IMC, "zn": ZieglerNichols, "cohen-coon": CohenCoon, "cc": CohenCoon} {
		if got, err := ParseRule(in); err != nil || got != want {
			t.Errorf("ParseRule(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseRule("pid"); err == nil {
		t.Errorf("ParseRule(%q) succeeded; want an error", "pid")
	}
	if _, err := ParseForm("pd"); err == nil {
		t.Errorf("ParseForm(%q) succeeded; want an error", "pd")
	}
}

func TestGainsJSON(t *testing.T) {
	g, err := Tune(reference, ZieglerNichols, Options{Form: PID})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"rule":"zn","form":"pid","kp":72,"ki":7.2,"kd":180,"ti_s":10,"td_s":2.5}`
	if string(b) != want {
		t.Errorf("json.Marshal(Gains) = %s; want %s", b, want)
	}
	var back Gains
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != g {
		t.Errorf("Gains round trip = %+v; want %+v", back, g)
	}
}
