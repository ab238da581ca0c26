package lab

import (
	"fmt"

	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/control"
)

// ControllerConfig returns the control.Config that NewPolicy tunes for a
// PID-family controller (pi, pid, pi-aw-spf-ff), so that the product (the
// demo's and an operator's PARAMS) runs exactly the controller the lab
// measured. Fixed, aimd and smith are not control.Controller configurations.
func ControllerConfig(name string, s sim.Scenario, p Plant, g Gains) (control.Config, map[string]float64, error) {
	pol, tun, err := NewPolicy(name, s, p, g)
	if err != nil {
		return control.Config{}, nil, err
	}
	pp, ok := pol.(*pidPolicy)
	if !ok {
		return control.Config{}, nil, fmt.Errorf("controller %q is not of the PID family", name)
	}
	return pp.c.Config, tun, nil
}
