package lab

// TEMPORARY: a copy of the selection of pkg/control's Override (branch
// i19a), until that branch is merged; then this file goes and the lab runs
// control.Override itself.

import (
	"math"

	"github.com/sluice-dev/sluice/pkg/control"
)

type signalInput struct {
	Name  string
	Input control.Input
}

type overrideOutput struct {
	Rate     float64
	Limiting string
	Outputs  map[string]control.Output
}

type overrideSel struct {
	Controllers map[string]*control.Controller
	Limiting    string
}

func (o *overrideSel) Update(in []signalInput) overrideOutput {
	res := overrideOutput{Rate: math.NaN(), Outputs: map[string]control.Output{}}
	for _, s := range in {
		c := o.Controllers[s.Name]
		out := c.Update(s.Input)
		res.Outputs[s.Name] = out
		if math.IsNaN(res.Rate) || out.Rate < res.Rate || (out.Rate == res.Rate && s.Name == o.Limiting) {
			res.Rate, res.Limiting = out.Rate, s.Name
		}
	}
	for _, s := range in {
		out := res.Outputs[s.Name]
		c := o.Controllers[s.Name]
		if s.Name != res.Limiting && !out.Held {
			c.State.Integral = res.Rate - out.FF - out.D
		}
		c.Override(res.Rate)
	}
	o.Limiting = res.Limiting
	return res
}
