package main

import (
	"flag"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/sim"
)

// latencyFlags are the flags of the destination's latency per message
// (sim.Latency), the consumers' inner loop's signal.
type latencyFlags struct {
	mode    string
	service time.Duration
	noise   float64
}

func (f *latencyFlags) add(fs *flag.FlagSet) {
	d := sim.DefaultLatency()
	fs.StringVar(&f.mode, "latency", d.Mode, "the destination's latency per message: "+strings.Join(sim.LatencyModes(), ", ")+
		" (flat: does not respond to load; external: follows the outside load only), or none")
	fs.DurationVar(&f.service, "latency-service", d.Service, "latency per message of an idle destination")
	fs.Float64Var(&f.noise, "latency-noise", d.Noise, "latency noise, standard deviation of its log per step")
}

// apply sets s's latency from the flags given on fs's command line; none
// removes it.
func (f *latencyFlags) apply(fs *flag.FlagSet, s *sim.Scenario) {
	given := false
	fs.Visit(func(fl *flag.Flag) { given = given || strings.HasPrefix(fl.Name, "latency") })
	if s.Latency != nil {
		l := *s.Latency
		s.Latency = &l
	}
	if !given {
		return
	}
	if f.mode == "none" {
		s.Latency = nil
		return
	}
	s.Latency = &sim.Latency{Mode: f.mode, Service: f.service, Noise: f.noise}
}
