package stepdemo

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
)

// stepper is a simulated world that moves when Advance lets it: the one
// loop's (demo.Sim) or several queues into one database (demo.SharedSim).
type stepper interface {
	Advance(ctx context.Context, d time.Duration) error
	Err() error
	Now() time.Time
	Store() *memstore.Store
	Close()
}

// NewShared is the demo of several queues into one database
// (demo.SharedScenario, 47.5 simulated hours with its events once): the
// destination and its three members are the dashboard's loops, each with
// its history; an edit of the destination's setpoint or of a member's
// weight is followed at the next tick.
func NewShared(start time.Time, seed uint64) (*Demo, error) {
	s, members, changes := demo.SharedScenario()
	s.Seed, s.Noise, s.Duration = seed, noise, cycles*cycle
	c, _, err := demo.Tune(s)
	if err != nil {
		return nil, fmt.Errorf("demo parameters: %w", err)
	}
	d := &Demo{hist: ddbhistory.NewMemory(0)}
	sm, err := demo.StartShared(demo.SharedConfig{Scenario: s, Params: demo.DefaultParams(s, c), Members: members,
		WeightChanges: changes, Layout: demo.LayoutShared, Start: start, OnTick: d.record})
	if err != nil {
		return nil, err
	}
	d.sim, d.loops = sm, sm.Loops()
	d.params = dashboard.NewLoopParams(sm.Store(), sm.Now)
	return d, nil
}
