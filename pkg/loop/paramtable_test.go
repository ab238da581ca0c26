package loop_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

var update = flag.Bool("update", false, "rewrite the parameter table of docs/controller.md")

// TestDocsParamsTable keeps the parameter table of docs/controller.md what
// the declarations say.
func TestDocsParamsTable(t *testing.T) {
	const path = "../../docs/controller.md"
	const begin, end = "-->\n", "<!-- end of params table -->"
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "<!-- params table:")
	j := strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s: no params table markers", path)
	}
	i += strings.Index(doc[i:], begin) + len(begin)
	want := loop.ParamsMarkdown(looptest.Sources())
	if *update {
		if err := os.WriteFile(path, []byte(doc[:i]+want+doc[j:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got := doc[i:j]; got != want {
		t.Errorf("%s: the parameter table is not the declared one; run `go test ./pkg/loop -run TestDocsParamsTable -update`", path)
	}
}

// Every declared attribute round-trips: encoding a decoded item and decoding
// it again gives the same parameters.
func TestParamsAttributesCoverEncoding(t *testing.T) {
	names := map[string]bool{}
	for _, a := range loop.ParamsAttributes(looptest.Sources()) {
		names[a.Name] = true
	}
	p, err := loop.DecodeParams("t", map[string]any{
		"setpoint": 70.0, "kp": 1.0, "ki": 0.1, "min_rate": 1.0, "max_rate": 100.0,
		"metric_dimensions": map[string]any{"DBInstanceIdentifier": "db"}, "ff_gain": 0.05,
		"balance_kp": 0.2, "derivative_filter": "10s", "delay_aware": true, "noise_band": 1.0,
	}, looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	for name := range p.Attrs(looptest.Sources()) {
		if !names[name] {
			t.Errorf("Attrs writes %q, which ParamsAttributes does not declare", name)
		}
	}
}

// The ranges come from the declarations: every attribute out of its range
// is refused with the range, at the top level and in a signal, and the
// declared range and unit are what ParamsAttributes says.
func TestDeclaredRanges(t *testing.T) {
	_, err := loop.DecodeParams("t", valid(func(a map[string]any) {
		a["min_rate"], a["max_rate"], a["noise_band"], a["tick_period"] = -1.0, 0.0, -2.0, "500ms"
		a["signals"] = map[string]any{"lag": map[string]any{"setpoint": 10.0, "kp": 1.0, "unit": "s", "noise_band": -1.0,
			"metric_dimensions": map[string]any{"DBInstanceIdentifier": "lag"}}}
	}), looptest.Sources())
	wantRefused(t, err, "min_rate", "-1 must be a finite number >= 0")
	wantRefused(t, err, "max_rate", "0 must be a finite number > 0")
	wantRefused(t, err, "noise_band", ">= 0")
	wantRefused(t, err, "tick_period", "500ms must be a duration >= 1s")
	wantRefused(t, err, "signals.lag.noise_band", "-1 must be a finite number >= 0")
	for _, a := range loop.ParamsAttributes(looptest.Sources()) {
		if a.Name == "ceiling" && (a.Range != "in [0, 100]" || a.Unit != "%" || !strings.Contains(a.Help(), "range in [0, 100]")) {
			t.Errorf("ParamsAttributes: ceiling = %+v; want range in [0, 100], unit %%", a)
		}
		if a.Name == "noise_band" && !a.PerSignal || a.Name == "min_rate" && a.PerSignal {
			t.Errorf("ParamsAttributes: %s per signal = %v", a.Name, a.PerSignal)
		}
	}
}
