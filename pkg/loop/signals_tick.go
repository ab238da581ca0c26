package loop

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// SignalReport is one signal of a loop with several signals in a tick's
// Report.
type SignalReport struct {
	Name string `json:"name"`
	Unit string `json:"unit,omitempty"`
	// Setpoint is the signal's setpoint; Measured its newest datapoint
	// (NaN when none was found).
	Setpoint float64 `json:"setpoint"`
	Measured float64 `json:"measured"`
	// Rate is what the signal's controller asked for.
	Rate float64 `json:"rate"`
	// Stale is true when its metric was stale or missing; Tracking when
	// another signal limited the rate.
	Stale    bool `json:"stale"`
	Tracking bool `json:"tracking"`
}

// readMetrics reads the metrics of every due loop with one ReadMetrics call
// per source: each loop's metric (or one query per node of a loop with
// nodes) and each of its further signals' metrics, all in the same batch.
func (t *Ticker) readMetrics(ctx context.Context, work []*due, now time.Time) {
	queries := make(map[string][]metric.Query)
	dsts := make(map[string][]*metric.Sample)
	add := func(q metric.Query, staleAfter time.Duration, dst *metric.Sample) {
		q.Lookback = staleAfter + q.Period
		queries[q.Source] = append(queries[q.Source], q)
		dsts[q.Source] = append(dsts[q.Source], dst)
	}
	for _, w := range work {
		p := &w.params
		if len(p.Nodes) == 0 {
			add(p.Metric, p.StaleAfter, &w.sample)
		} else {
			w.nodes = make([]metric.Sample, len(p.Nodes))
			for j, n := range p.Nodes {
				add(p.NodeQuery(t.Sources, n), p.StaleAfter, &w.nodes[j])
			}
		}
		w.signals = make([]metric.Sample, len(p.Signals))
		for j, s := range p.Signals {
			add(s.Metric, s.StaleAfter, &w.signals[j])
		}
	}
	for src, qs := range queries {
		reader, ok := t.Metrics[src]
		if !ok || reader == nil {
			for _, d := range dsts[src] {
				d.Err = fmt.Errorf("no reader for metric source %q", src)
			}
			continue
		}
		samples, err := reader.ReadMetrics(ctx, qs, now)
		for i, d := range dsts[src] {
			switch {
			case err != nil:
				d.Err = fmt.Errorf("read %s metrics: %w", src, err)
			case i < len(samples):
				*d = samples[i]
			default:
				d.Err = fmt.Errorf("read %s metrics: reader returned %d samples for %d queries", src, len(samples), len(qs))
			}
		}
	}
}

// sampleInput turns a signal's sample into its controller's input (q is the
// loop's parameters as the signal sees them): the value, how old it is after
// its period ended, and whether it is fresh (found, valid, not older than
// the signal's stale_after).
func sampleInput(q *Params, s metric.Sample, cc control.Config, now time.Time, elapsed time.Duration) (control.Input, bool, time.Duration) {
	fresh := s.Err == nil && s.Found && cc.ValidMeasurement(s.Value)
	var age time.Duration
	if s.Found {
		age = max(now.Sub(s.Time.Add(q.Metric.Period)), 0)
	}
	if fresh && age > q.StaleAfter {
		fresh = false
	}
	return control.Input{
		Setpoint:          q.Setpoint,
		Measurement:       s.Value,
		MeasurementAge:    age,
		MeasurementPeriod: q.Metric.Period,
		SamplingInterval:  elapsed,
	}, fresh, age
}

// override runs a loop with several signals (override control): every
// signal's controller on its own metric, the lowest output applied, the
// others tracking it (control.Override). A stale signal follows its own
// stale policy, except the signal that limited the rate at the last tick:
// blind, it fails closed to min_rate (after its stale_grace). first is the
// first signal's controller (State.Controller) and in its input. It records
// every signal in st and r and returns what was applied: the limiting
// signal's terms with the applied rate.
func (w *due) override(first *control.Controller, st *State, in control.Input, fresh bool, prev *State, now time.Time, dt time.Duration, r *Report) control.Output {
	p := w.params
	names := p.SignalNames()
	o := control.Override{Controllers: make(map[string]*control.Controller, len(names)), Asked: map[string]float64{}}
	old := make(map[string]SignalState, len(names))
	prevRate := st.Rate
	if prev != nil {
		o.Limiting = prev.Limiting
		for _, s := range prev.Signals {
			old[s.Name] = s
			o.Asked[s.Name] = s.Terms.Rate
		}
	}
	sigs := make([]SignalState, len(names))
	inputs := make([]control.SignalInput, len(names))
	measured := make([]float64, len(names))
	var errs []error
	for i, name := range names {
		q, c, sin, ok, smp := p, first, in, fresh, w.sample
		if i > 0 {
			q, smp = p.ForSignal(p.Signals[i-1]), w.signals[i-1]
			c = &control.Controller{Config: q.ControlConfig(), State: old[name].Controller}
			sin, ok, _ = sampleInput(&q, smp, c.Config, now, in.SamplingInterval)
			sin.ActualRate, sin.ActualKnown = in.ActualRate, in.ActualKnown
			if smp.Err != nil {
				errs = append(errs, fmt.Errorf("signal %s: %w", name, smp.Err))
			}
		}
		sigs[i] = old[name]
		sigs[i].Name, sigs[i].Setpoint, sigs[i].Unit = name, q.Setpoint, signalUnit(q, i)
		measured[i] = math.NaN()
		if smp.Found {
			sigs[i].MetricAt, sigs[i].Measured, measured[i] = smp.Time, smp.Value, smp.Value
		}
		o.Controllers[name] = c
		inputs[i] = signalInput(c, q, &sigs[i], sin, ok, name == o.Limiting, prevRate, now, dt)
		// A lag of 0 says only that the replica keeps up.
		inputs[i].AtFloor = ok && !q.percent() && sin.Measurement <= 0
		if i > 0 && q.DrainFeedforward {
			sigs[i].Drain = measureDrain(old[name], smp, ok, in)
			if d := sigs[i].Drain; ok && d.Pace > 0 {
				inputs[i].Input.Feedforward, inputs[i].Input.FeedforwardKnown = d.Pace, true
			}
		}
	}
	res := o.Update(inputs)
	lim := 0
	for i, name := range names {
		out := res.Outputs[name]
		sigs[i].Terms, sigs[i].Tracking = out, name != res.Limiting
		if i > 0 {
			sigs[i].Controller = o.Controllers[name].State
		}
		if sigs[i].Drain != nil {
			sigs[i].Drain.Record(now, res.Rate)
		}
		if name == res.Limiting {
			lim = i
		}
		r.Signals = append(r.Signals, SignalReport{Name: name, Unit: sigs[i].Unit, Setpoint: sigs[i].Setpoint,
			Measured: measured[i], Rate: out.Rate, Stale: sigs[i].Stale, Tracking: sigs[i].Tracking})
	}
	if w.sample.Err == nil && len(errs) > 0 {
		r.Err = errors.Join(errs...)
	}
	st.Limiting, st.Signals = res.Limiting, sigs
	st.Stale, st.StaleSince = sigs[lim].Stale, sigs[lim].StaleSince
	r.Limiting, r.Stale = res.Limiting, st.Stale
	out := res.Outputs[res.Limiting]
	out.Rate = res.Rate
	return out
}

// signalInput is one signal's input to the override: with a stale metric,
// no measurement, and the stale policy that says what the signal allows
// (fail-closed to min_rate when it limited the rate); on the first fresh
// tick after a stale period, a bumpless resume from the rate in force (the
// controller tracks it, as a one-signal loop does). It keeps the signal's
// stale record in sig.
func signalInput(c *control.Controller, q Params, sig *SignalState, in control.Input, fresh, limiting bool, prevRate float64, now time.Time, dt time.Duration) control.SignalInput {
	si := control.SignalInput{Name: sig.Name, Input: in}
	switch {
	case !fresh:
		si.Input.Measurement = math.NaN()
		if !sig.Stale {
			sig.StaleSince = now
		}
		sig.Stale = true
		// Stale for this tick's interval at least (as a one-signal loop).
		si.StaleFor = now.Sub(sig.StaleSince) + dt
		si.Stale = q.StalePolicy()
		if limiting {
			si.Stale.Action, si.Stale.SafeRate = control.StaleFailClosed, q.MinRate
		}
	case sig.Stale && q.Mode != ModeManual && c.State.Init:
		c.Config.Mode, c.Config.ManualRate = control.ModeManual, prevRate
		sig.Stale, sig.StaleSince = false, time.Time{}
	default:
		sig.Stale, sig.StaleSince = false, time.Time{}
	}
	return si
}

// signalUnit is the unit a signal is shown in: the first signal's default
// is %.
func signalUnit(q Params, i int) string {
	if i == 0 && q.Unit == "" {
		return "%"
	}
	if q.Unit == unitNone {
		return ""
	}
	return q.Unit
}

// measureDrain is a lag signal's drain after this tick's reading smp
// (fresh when ok): the last tick's, measured over the interval since the
// last reading (Drain.Measure), bounded by what the consumers took (in's
// ActualRate) while the replica may have been idle.
func measureDrain(last SignalState, smp metric.Sample, ok bool, in control.Input) *Drain {
	d := last.Drain.Clone()
	if d == nil {
		d = &Drain{}
	}
	taken := math.Inf(1)
	if in.ActualKnown && in.ActualRate >= 0 {
		taken = in.ActualRate
	}
	if ok && !last.MetricAt.IsZero() && smp.Time.After(last.MetricAt) {
		d.Measure(last.MetricAt, last.Measured, smp.Time, smp.Value, taken)
	}
	return d
}
