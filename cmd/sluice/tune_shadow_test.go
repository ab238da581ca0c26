package main

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/internal/sim/lab"
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

// The lab's recorder starts one controller update ahead of its first point;
// the tests read the record from its eleventh minute on (--since 170m), as
// a table's history starts in the middle of a run.

func TestShadowReportReplayMatchesRecord(t *testing.T) {
	s := sim.Reference()
	s.Noise = 1
	for _, tc := range []struct {
		name string
		g    lab.Gains
	}{{"tuned", lab.Gains{}}, {"sluggish", badGains()}} {
		t.Run(tc.name, func(t *testing.T) {
			live := writeLabHistoryGains(t, s, tc.g)
			got, code := shadowReportOf(t, "--history-file", live, "--shadow-file", live, "--since", "170m")
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
	got, code := shadowReportOf(t, "--history-file", bad, "--shadow-file", good, "--since", "170m")
	if code != 0 || got.Verdict != "promote" || got.IAERatio >= 0.95 {
		t.Errorf("live sluggish, shadow tuned from the true model: exit %d, iae_ratio %.3f, verdict %q (%s); want promote", code, got.IAERatio, got.Verdict, got.Reason)
	}
	got, code = shadowReportOf(t, "--history-file", good, "--shadow-file", bad, "--since", "170m")
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
