package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
)

func TestWhyHistoryFile(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	f := history.File{Loop: "orders", Points: []history.Point{
		{T: t0, Setpoint: 70, Measured: 71, Rate: 400, Reason: "limited", ReasonText: "limited by cpu: 71 % at its 70 % setpoint"},
		{T: t0.Add(time.Minute), Setpoint: 50, Measured: 71, Rate: 300, Reason: "limited", ReasonText: "limited by cpu: 71 % above its 50 % setpoint"},
	}}
	path := filepath.Join(t.TempDir(), "h.json")
	if err := f.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"why", "--history", path, "-n", "5"}, &out, &errb); code != 0 {
		t.Fatalf("sluice why = %d (stderr %q); want 0", code, errb.String())
	}
	for _, want := range []string{"loop orders: 2 ticks", "setpoint edit: 70 -> 50", "now: limited by cpu: 71 % above its 50 % setpoint", "what would change it:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("sluice why printed\n%s\nwant %q", out.String(), want)
		}
	}
	if code := run([]string{"why"}, &out, &errb); code != 2 {
		t.Errorf("sluice why without --loop = %d; want 2", code)
	}
}
