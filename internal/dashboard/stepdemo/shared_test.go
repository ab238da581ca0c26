package stepdemo

import (
	"context"
	"testing"
	"time"
)

func TestSharedDemoRecordsEveryMember(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d, err := NewShared(start, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for range 10 {
		if err := d.Step(ctx); err != nil {
			t.Fatal(err)
		}
	}
	loops, _ := d.Loops(ctx)
	if len(loops) != 4 || loops[0] != "db" {
		t.Fatalf("Loops = %v; want the destination and three members", loops)
	}
	// What the members are expected to take: their rates, a member
	// limited by demand at most what it took (the margin above is given
	// again to the others).
	var total, consumed float64
	for _, id := range loops {
		pts, err := d.History().Last(ctx, id, 1)
		if err != nil || len(pts) != 1 {
			t.Fatalf("history of %s = %v, %v; want a point", id, pts, err)
		}
		if id != "db" {
			if pts[0].Limited {
				total += min(pts[0].Rate, pts[0].Consumed)
			} else {
				total += pts[0].Rate
			}
			consumed += pts[0].Consumed
		}
	}
	dest, _ := d.History().Last(ctx, "db", 1)
	if total > dest[0].Rate*(1+1e-9) || total < 0.99*dest[0].Rate {
		t.Errorf("members are expected to take %v; want the destination's %v", total, dest[0].Rate)
	}
	if consumed > 1.05*dest[0].Consumed || consumed < 0.9*dest[0].Consumed {
		t.Errorf("members' processed rates sum to %v; want about the destination's %v (each member its own)", consumed, dest[0].Consumed)
	}
}
