package loop_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

func TestMappingConcurrency(t *testing.T) {
	for _, c := range []struct {
		name                 string
		rate, secs, size, hr float64
		want                 int
	}{
		{"the formula", 400, 0.5, 10, 0.25, 25},         // 400 × 0.5 / 10 × 1.25
		{"rounds up", 100, 0.1, 10, 0.25, 2},            // 1.25 → 2
		{"exact product stays", 80, 0.5, 10, 0.25, 5},   // 5.000…01 from floating point is 5
		{"no headroom", 400, 0.5, 10, 0, 20},            // 400 × 0.5 / 10
		{"zero rate is the least", 0, 0.5, 10, 0.25, 2}, // never below 2
		{"one instance is two", 10, 0.5, 10, 0.25, 2},   // 0.625 → 1 → 2
		{"huge rate is the most", 100000, 0.5, 10, 0.25, 1000},
		{"no batch time yet", 400, 0, 10, 0.25, 2},
		{"batch below one message", 10, 1, 0, 0.25, 13}, // counted as 1 message
		{"not a number", 0, 0.5, 10, 0.25, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := loop.MappingConcurrency(c.rate, c.secs, c.size, c.hr); got != c.want {
				t.Errorf("MappingConcurrency(%v, %v, %v, %v) = %d; want %d", c.rate, c.secs, c.size, c.hr, got, c.want)
			}
		})
	}
}

func TestDecodeParamsMapping(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(nil), looptest.Sources())
	if err != nil || p.Mapping != nil {
		t.Fatalf("without esm_uuid: Mapping = %+v, %v; want nil (the loop owns no mapping)", p.Mapping, err)
	}
	p, err = loop.DecodeParams("orders", valid(func(a map[string]any) { a["esm_uuid"] = "a1b2" }), looptest.Sources())
	want := loop.MappingConfig{UUID: "a1b2", Kind: loop.MappingSQS, UpdateInterval: 5 * time.Minute, Min: 2, Max: 1000}
	if err != nil || p.Mapping == nil || *p.Mapping != want {
		t.Fatalf("esm_uuid alone: Mapping = %+v, %v; want the defaults %+v", p.Mapping, err, want)
	}
	back, err := loop.DecodeParams("orders", p.Attrs(looptest.Sources()), looptest.Sources())
	if err != nil || back.Mapping == nil || *back.Mapping != want {
		t.Errorf("round trip: Mapping = %+v, %v; want %+v", back.Mapping, err, want)
	}
	p, err = loop.DecodeParams("orders", valid(func(a map[string]any) {
		a["esm_uuid"], a["esm_update_interval"], a["esm_min_concurrency"], a["esm_max_concurrency"] = "a1b2", "10m", 5.0, 50.0
	}), looptest.Sources())
	want = loop.MappingConfig{UUID: "a1b2", Kind: loop.MappingSQS, UpdateInterval: 10 * time.Minute, Min: 5, Max: 50}
	if err != nil || p.Mapping == nil || *p.Mapping != want {
		t.Errorf("edited: Mapping = %+v, %v; want %+v", p.Mapping, err, want)
	}
}

func TestDecodeParamsMappingRefusals(t *testing.T) {
	for _, c := range []struct {
		name  string
		edit  map[string]any
		field string
		says  string
	}{
		{"below two", map[string]any{"esm_uuid": "u", "esm_min_concurrency": 1.0}, "esm_min_concurrency", "2..1000"},
		{"above a thousand", map[string]any{"esm_uuid": "u", "esm_max_concurrency": 5000.0}, "esm_max_concurrency", "2..1000"},
		{"not whole", map[string]any{"esm_uuid": "u", "esm_max_concurrency": 10.5}, "esm_max_concurrency", "whole number"},
		{"min above max", map[string]any{"esm_uuid": "u", "esm_min_concurrency": 20.0, "esm_max_concurrency": 10.0}, "esm_min_concurrency", "above esm_max_concurrency"},
		{"zero interval", map[string]any{"esm_uuid": "u", "esm_update_interval": "0s"}, "esm_update_interval", "positive"},
		{"blank uuid", map[string]any{"esm_uuid": " "}, "esm_uuid", "empty"},
		{"bounds without a mapping", map[string]any{"esm_max_concurrency": 10.0}, "esm_max_concurrency", "esm_uuid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := loop.DecodeParams("orders", valid(func(a map[string]any) {
				for k, v := range c.edit {
					a[k] = v
				}
			}), looptest.Sources())
			wantRefused(t, err, c.field, c.says)
		})
	}
}

// Whatever the measurements say (NaN, infinities, negative or huge
// figures), the concurrency is within what a mapping accepts.
func FuzzMappingConcurrency(f *testing.F) {
	f.Add(400.0, 0.5, 10.0, 0.25)
	f.Add(1e300, 1e300, 1e-300, 1e300)
	f.Add(-1.0, -1.0, -1.0, -1.0)
	f.Fuzz(func(t *testing.T, rate, secs, size, headroom float64) {
		if n := loop.MappingConcurrency(rate, secs, size, headroom); n < 2 || n > 1000 {
			t.Errorf("MappingConcurrency(%v, %v, %v, %v) = %d; want within 2..1000", rate, secs, size, headroom, n)
		}
	})
}
