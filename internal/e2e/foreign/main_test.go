package main

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

// The run's PARAMS are valid and name the foreign consumer's function and
// queue, so that the controller sizes the mapping from their figures.
func TestParamsNameTheForeignConsumer(t *testing.T) {
	r := &run{Harness: e2ekit.Harness[config, Result]{Cfg: config{Flags: e2ekit.Flags{Tick: 5 * time.Second, MaxRate: 60}, rieInstances: 4}}}
	r.loopID, r.instance, r.function, r.uuid = "foreign", "db-1", "foreign-1", "u-1"
	r.queueURL = "http://127.0.0.1:9324/000000000000/foreign-1"
	p := r.params(30)
	if err := p.Validate(looptest.Sources()); err != nil {
		t.Fatal(err)
	}
	if m := p.Mapping; m.Function != "foreign-1" || p.MappingQueue() != "foreign-1" || m.Max != 4 {
		t.Errorf("mapping %+v; want the function, the queue foreign-1 and at most the 4 emulators", m)
	}
}
