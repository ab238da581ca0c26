package lab

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/plot"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/ident"
)

// CompareFigure draws the true CPU, the measured CPU and the allowed rate of
// every controller, with the setpoint and the disturbances.
func CompareFigure(s sim.Scenario, rep Report) plot.Figure {
	const every = 10 // one point per 10 integration steps
	thin := func(x []float64) []float64 {
		out := make([]float64, 0, len(x)/every+1)
		for i := 0; i < len(x); i += every {
			out = append(out, x[i])
		}
		return out
	}
	var shades []plot.Shade
	for _, d := range s.Disturbances {
		shades = append(shades, plot.Shade{From: d.At.Minutes(), To: (d.At + d.Duration).Minutes(), Label: fmt.Sprintf("disturbance %+g points", d.Size)})
	}
	cpu := plot.Panel{Title: "true CPU (what the destination feels)", YLabel: "CPU (%)", YMin: 0, YMax: 100, Shades: shades}
	meas := plot.Panel{Title: "measured CPU (newest published datapoint: what the controller sees)", YLabel: "CPU (%)", YMin: 0, YMax: 100, Shades: shades}
	rate := plot.Panel{Title: "allowed rate", YLabel: "messages/s", Shades: shades}
	for i, r := range rep.Results {
		minutes := make([]float64, 0, len(r.Series.T)/every+1)
		for _, t := range thin(r.Series.T) {
			minutes = append(minutes, t/60)
		}
		if i == 0 {
			sp := plot.Series{Name: "setpoint", X: minutes, Y: thin(r.Series.Setpoint), Color: "black", Dashed: true}
			cpu.Series = append(cpu.Series, sp)
			meas.Series = append(meas.Series, sp)
		}
		color := ControllerColor(r.Controller)
		cpu.Series = append(cpu.Series, plot.Series{Name: r.Controller, X: minutes, Y: thin(r.Series.CPU), Color: color})
		meas.Series = append(meas.Series, plot.Series{Name: r.Controller, X: minutes, Y: thin(r.Series.Measured), Color: color})
		rate.Series = append(rate.Series, plot.Series{Name: r.Controller, X: minutes, Y: thin(r.Series.Allowed), Color: color})
	}
	panels := []plot.Panel{cpu, meas, rate}
	if s.Replica != nil {
		panels = []plot.Panel{cpu, lagPanel(s, rep, thin, shades), meas, rate}
	}
	return plot.Figure{
		Title:  fmt.Sprintf("sluice lab compare: loop dead time %.0f s, iae_bound %.0f point-s", rep.LoopDeadTimeS, rep.IAEBound),
		XLabel: "time (min)",
		Width:  1100,
		Panels: panels,
	}
}

// lagPanel draws the replica's true lag of every controller with its
// setpoint and band, up to 8 x the setpoint (a loop on the CPU alone lets
// the lag grow without bound).
func lagPanel(s sim.Scenario, rep Report, thin func([]float64) []float64, shades []plot.Shade) plot.Panel {
	top := 8 * s.Replica.Setpoint
	p := plot.Panel{Title: fmt.Sprintf("replication lag (true; clipped at %g s)", top), YLabel: "lag (s)", YMin: 0, YMax: top, Shades: shades}
	for i, r := range rep.Results {
		minutes := thin(r.Series.T)
		for j := range minutes {
			minutes[j] /= 60
		}
		if i == 0 {
			sp, band := make([]float64, len(minutes)), make([]float64, len(minutes))
			for j := range sp {
				sp[j], band[j] = s.Replica.Setpoint, s.Replica.Setpoint+s.Replica.Band
			}
			p.Series = append(p.Series, plot.Series{Name: "lag setpoint", X: minutes, Y: sp, Color: "black", Dashed: true},
				plot.Series{Name: "setpoint + band", X: minutes, Y: band, Color: "#7f7f7f", Dashed: true})
		}
		p.Series = append(p.Series, plot.Series{Name: r.Controller, X: minutes, Y: thin(r.Series.Lag), Color: ControllerColor(r.Controller)})
	}
	return p
}

// IdentifyFigure plots the measured output with the fitted model's response,
// and the input below.
func IdentifyFigure(source string, d ident.Data, r ident.Result) plot.Figure {
	fit := ident.Simulate(r.Model, d.T, d.U)
	m := r.Model
	return plot.Figure{
		Title:  fmt.Sprintf("%s: gain %.4g, tau %v, dead time %v, rmse %.3g", source, m.Gain, m.Tau.Round(100*time.Millisecond), m.DeadTime.Round(100*time.Millisecond), r.RMSE),
		XLabel: "time (s)",
		Panels: []plot.Panel{
			{
				Title:  "Output",
				YLabel: "CPU (%)",
				Series: []plot.Series{
					{Name: "measured", X: d.T, Y: d.Y, Width: 1},
					{Name: "FOPDT fit", X: d.T, Y: fit, Width: 2},
				},
			},
			{
				Title:  "Input",
				YLabel: "rate (msg/s)",
				Series: []plot.Series{{Name: "rate", X: d.T, Y: d.U}},
			},
		},
	}
}

// ControllerColor is the colour of controller name in the lab's plots
// (matplotlib's tab10), "" for one the lab does not know.
func ControllerColor(name string) string {
	switch name {
	case Fixed:
		return "#7f7f7f"
	case AIMD:
		return "#ff7f0e"
	case PI:
		return "#1f77b4"
	case PID:
		return "#9467bd"
	case PIAWSPFF:
		return "#2ca02c"
	case Smith:
		return "#d62728"
	case Override:
		return "#17becf"
	case Cascade:
		return "#8c564b"
	}
	return ""
}
