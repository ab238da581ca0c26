package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

// shadowJSON is the part of `tune --shadow-report --json` the tests read.
type shadowJSON struct {
	ExcitationOK bool `json:"excitation_ok"`
	Fit          struct {
		Measured float64 `json:"measured_pct"`
		Rate     float64 `json:"rate_pct"`
	} `json:"fit"`
	Live      struct{ IAE float64 } `json:"live"`
	ShadowRun struct{ IAE float64 } `json:"shadow_run"`
	IAERatio  float64               `json:"iae_ratio"`
	Verdict   string                `json:"verdict"`
	Reason    string                `json:"verdict_reason"`
}

func shadowReportOf(t *testing.T, args ...string) (shadowJSON, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"tune", "--shadow-report", "--json"}, args...), &out, &errb)
	var got shadowJSON
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("exit %d, output %q: %v (stderr %s)", code, out.String(), err, errb.String())
	}
	t.Logf("%s", strings.Join(strings.Fields(out.String()), " "))
	return got, code
}

// badGains are deliberately sluggish gains: a tenth of the tuned ones.
func badGains() lab.Gains {
	kp, ki := 0.0077, 0.016
	return lab.Gains{Kp: &kp, Ki: &ki}
}

func TestShadowReportReplayMatchesRecord(t *testing.T) {
	s := sim.Reference()
	s.Noise = 1
	for _, tc := range []struct {
		name string
		g    lab.Gains
	}{{"tuned", lab.Gains{}}, {"sluggish", badGains()}} {
		t.Run(tc.name, func(t *testing.T) {
			live := writeLabHistoryGains(t, s, tc.g)
			got, code := shadowReportOf(t, "--history-file", live, "--shadow-file", live)
			if code != 0 || got.Fit.Measured < 90 || got.Fit.Rate < 90 {
				t.Errorf("exit %d, replay of the live gains fits the record by %.1f %% (measured), %.1f %% (rate); want >= 90 %%",
					code, got.Fit.Measured, got.Fit.Rate)
			}
			if got.IAERatio != 1 || got.Verdict != "keep" {
				t.Errorf("same gains: iae_ratio %v, verdict %q; want 1, keep", got.IAERatio, got.Verdict)
			}
		})
	}
}

func TestShadowReportProposalBeatsBadGains(t *testing.T) {
	s := sim.Reference()
	s.Noise = 1
	good := writeLabHistoryGains(t, s, lab.Gains{})
	bad := writeLabHistoryGains(t, s, badGains())
	got, code := shadowReportOf(t, "--history-file", bad, "--shadow-file", good)
	if code != 0 || got.Verdict != "promote" || got.IAERatio >= 0.95 {
		t.Errorf("live sluggish, shadow tuned from the true model: exit %d, iae_ratio %.3f, verdict %q (%s); want promote", code, got.IAERatio, got.Verdict, got.Reason)
	}
	got, code = shadowReportOf(t, "--history-file", good, "--shadow-file", bad)
	if code != 0 || got.Verdict != "keep" || got.IAERatio <= 1 {
		t.Errorf("live tuned, shadow sluggish: exit %d, iae_ratio %.3f, verdict %q (%s); want keep, ratio > 1", code, got.IAERatio, got.Verdict, got.Reason)
	}
}

func TestShadowReportRefusesWithoutExcitation(t *testing.T) {
	s := sim.Reference()
	s.SetpointChanges, s.Disturbances = nil, nil
	live := writeLabHistoryGains(t, s, lab.Gains{})
	got, code := shadowReportOf(t, "--history-file", live, "--shadow-params", "kp=0.1 ki=0.2")
	if code != 1 || got.ExcitationOK || got.Verdict != "keep" || !strings.Contains(got.Reason, "cannot identify") {
		t.Errorf("no excitation: exit %d, excitation_ok %v, verdict %q (%s); want exit 1, refused with the reason", code, got.ExcitationOK, got.Verdict, got.Reason)
	}
}

// On the production tick's own history (`sluice demo --history-out`), the
// replay of the live gains reproduces the record, and deliberately bad
// gains as the shadow are kept out.
func TestShadowReportOnDemoHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for an hour of simulated time")
	}
	path := filepath.Join(t.TempDir(), "h.json")
	var out, errb bytes.Buffer
	args := []string{"demo", "--quiet", "--plot", "", "--duration", "60m", "--noise", "1",
		"--setpoint-change", "20m=50", "--disturbance", "35m+15m=20", "--history-out", path}
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("demo: exit %d: %s", code, errb.String())
	}
	got, code := shadowReportOf(t, "--history-file", path, "--shadow-params", "kp=0.0077 ki=0.016")
	if code != 0 || got.Fit.Measured < 95 || got.Fit.Rate < 95 {
		t.Errorf("exit %d: the live replay fits the record by %.1f %% (measured), %.1f %% (rate); want >= 95 %%", code, got.Fit.Measured, got.Fit.Rate)
	}
	if got.Verdict != "keep" || got.IAERatio <= 1 {
		t.Errorf("shadow with a tenth of the gains: iae_ratio %.3f, verdict %q (%s); want keep, ratio > 1", got.IAERatio, got.Verdict, got.Reason)
	}
}

// tune --shadow-report --loop --shadow reads the live loop's HIST items and
// both loops' PARAMS from the table.
func TestShadowReportTable(t *testing.T) {
	s := sim.Reference()
	s.Noise = 1
	f := readLabHistory(t, s)
	live := demo.DefaultParams(s, mustConfig(t, s, lab.Gains{}))
	table, store := tableWithHistory(t, "orders", live.Attrs(looptest.Sources()), f.Points)
	shadow := demo.DefaultParams(s, mustConfig(t, s, badGains()))
	shadow.Mode = loop.ModeShadow
	if err := store.WriteParams(context.Background(), "orders-shadow", shadow.Attrs(looptest.Sources())); err != nil {
		t.Fatal(err)
	}
	got, code := shadowReportOf(t, "--loop", "orders", "--shadow", "orders-shadow", "--table", table, "--since", "2h")
	if code != 0 || got.Fit.Measured < 90 || got.Verdict != "keep" || got.IAERatio <= 1 {
		t.Errorf("exit %d: fit %.1f %%, iae_ratio %.3f, verdict %q (%s); want fit >= 90 %%, the sluggish shadow kept", code, got.Fit.Measured, got.IAERatio, got.Verdict, got.Reason)
	}
}

func mustConfig(t *testing.T, s sim.Scenario, g lab.Gains) control.Config {
	t.Helper()
	cfg, _, err := lab.ControllerConfig(lab.PIAWSPFF, s, lab.Plant{Model: s.Plant, NoiseSD: s.Noise}, g)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// On the production tick's history of a loop run with deliberately bad
// gains, the gains tuned from the true model as the shadow are promoted.
func TestShadowReportPromotesOnDemoHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the demo for an hour of simulated time")
	}
	s := sim.Reference()
	s.Noise, s.Duration = 1, time.Hour
	s.SetpointChanges = []sim.SetpointChange{{At: 40 * time.Minute, Value: 50}}
	s.Disturbances = []sim.Disturbance{{At: 15 * time.Minute, Duration: 15 * time.Minute, Size: 20}}
	rec := newHistoryRecorder(s)
	params := demo.DefaultParams(s, mustConfig(t, s, badGains()))
	rec.file.Params = params.Attrs(looptest.Sources())
	if _, err := demo.Run(context.Background(), demo.Config{Scenario: s, Params: params, NoSeries: true, OnTick: rec.record}); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(t.TempDir(), "live.json")
	if err := rec.write(live); err != nil {
		t.Fatal(err)
	}
	tuned := mustConfig(t, s, lab.Gains{})
	shadow := fmt.Sprintf("kp=%g ki=%g", tuned.Kp, tuned.Ki)
	got, code := shadowReportOf(t, "--history-file", live, "--shadow-params", shadow)
	if code != 0 || got.Fit.Measured < 95 || got.Verdict != "promote" || got.IAERatio >= 0.95 {
		t.Errorf("live sluggish, shadow %s: exit %d, fit %.1f %%, iae_ratio %.3f, verdict %q (%s); want the live replay to fit, promote",
			shadow, code, got.Fit.Measured, got.IAERatio, got.Verdict, got.Reason)
	}
}
