package loop_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

func TestInnerParams(t *testing.T) {
	p, err := loop.DecodeParams("orders", valid(nil), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	if _, on := p.InnerConfig(); on {
		t.Errorf("InnerConfig of a loop without inner_loop: on; want off")
	}
	p, err = loop.DecodeParams("orders", valid(func(a map[string]any) { a["inner_loop"] = true }), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	c, on := p.InnerConfig()
	if !on || c.Tolerance != loop.DefaultInnerTolerance || c.ReactionTime != loop.DefaultInnerReactionTime {
		t.Errorf("InnerConfig = %+v, %v; want the defaults, on", c, on)
	}
	wantRoundTrip(t, "inner loop with defaults", p)
	p, err = loop.DecodeParams("orders", valid(func(a map[string]any) {
		a["inner_loop"], a["inner_tolerance"], a["inner_reaction_time"] = true, 0.3, "1m"
	}), looptest.Sources())
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := p.InnerConfig(); c.Tolerance != 0.3 || c.ReactionTime != time.Minute {
		t.Errorf("InnerConfig = %+v; want tolerance 0.3, reaction time 1m", c)
	}
	wantRoundTrip(t, "inner loop", p)
}

func TestInnerParamsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, field, says string
		edit              func(a map[string]any)
	}{
		{"tolerance without the loop", "inner_tolerance", "inner_loop", func(a map[string]any) { a["inner_tolerance"] = 0.3 }},
		{"tolerance out of range", "inner_tolerance", "", func(a map[string]any) { a["inner_loop"], a["inner_tolerance"] = true, -1.0 }},
		{"reaction time too short", "inner_reaction_time", "", func(a map[string]any) { a["inner_loop"], a["inner_reaction_time"] = true, "10ms" }},
		{"not a boolean", "inner_loop", "BOOL", func(a map[string]any) { a["inner_loop"] = "yes" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loop.DecodeParams("orders", valid(tc.edit), looptest.Sources())
			wantRefused(t, err, tc.field, tc.says)
		})
	}
}
