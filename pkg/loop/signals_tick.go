package loop

import (
	"cmp"
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

// signalView is one signal of a loop as its tick sees it, the first one
// (the top-level attributes) as any other: the loop's parameters as the
// signal sees them, its unit as shown, its newest datapoint and its
// controller.
type signalView struct {
	name string
	q    Params
	unit string
	smp  metric.Sample
	c    *control.Controller
	// ownState is true when the controller's state is kept in the
	// signal's record (SignalState.Controller); false for the first
	// signal's, kept in State.Controller as a one-signal loop keeps it.
	ownState bool
}

// signalViews returns the loop's signals in order: the first one's
// controller is first, the others' are restored from their records in old.
func (w *due) signalViews(first *control.Controller, old map[string]SignalState) []signalView {
	p := w.params
	views := []signalView{{name: p.FirstSignal(), q: p, unit: cmp.Or(p.Unit, "%"), smp: w.sample, c: first}}
	for i, s := range p.Signals {
		q := p.ForSignal(s)
		c := &control.Controller{Config: q.ControlConfig(), State: old[s.Name].Controller}
		views = append(views, signalView{name: s.Name, q: q, unit: s.Unit, smp: w.signals[i], c: c, ownState: true})
	}
	return views
}

// override runs a loop with several signals (override control): every
// signal's controller on its own metric, the lowest output applied, the
// others tracking it (control.Override). A stale signal follows its own
// stale policy, except the signal that limited the rate at the last tick:
// blind, it fails closed to min_rate (after its stale_grace). first is the
// first signal's controller (State.Controller); in is the loop's input
// (its interval and what the consumers took). It records every signal in
// st and r and returns what was applied: the limiting signal's terms with
// the applied rate.
func (w *due) override(tc *tickCtx, first *control.Controller, in control.Input) control.Output {
	st, prev, r := tc.st, tc.prev, tc.r
	o := control.Override{Controllers: map[string]*control.Controller{}, Asked: map[string]float64{}}
	old := map[string]SignalState{}
	if prev != nil {
		o.Limiting = prev.Limiting
		for _, s := range prev.Signals {
			old[s.Name] = s
			o.Asked[s.Name] = s.Terms.Rate
		}
	}
	views := w.signalViews(first, old)
	sigs := make([]SignalState, len(views))
	inputs := make([]control.SignalInput, len(views))
	measured := make([]float64, len(views))
	var errs []error
	for i, v := range views {
		sin, ok, _ := sampleInput(&v.q, v.smp, v.c.Config, tc.now, in.SamplingInterval)
		sin.ActualRate, sin.ActualKnown = in.ActualRate, in.ActualKnown
		if v.smp.Err != nil {
			errs = append(errs, fmt.Errorf("signal %s: %w", v.name, v.smp.Err))
		}
		sigs[i] = old[v.name]
		sigs[i].Name, sigs[i].Setpoint, sigs[i].Unit = v.name, v.q.Setpoint, v.unit
		measured[i] = math.NaN()
		if v.smp.Found {
			sigs[i].MetricAt, sigs[i].Measured, measured[i] = v.smp.Time, v.smp.Value, v.smp.Value
		}
		o.Controllers[v.name] = v.c
		inputs[i] = tc.signalInput(v.c, v.q, &sigs[i], sin, ok, v.name == o.Limiting)
		// A lag of 0 says only that the replica keeps up.
		inputs[i].AtFloor = ok && !v.q.percent() && sin.Measurement <= 0
		if v.q.DrainFeedforward {
			sigs[i].Drain = measureDrain(old[v.name], v.smp, ok, in)
			if d := sigs[i].Drain; ok && d.Pace > 0 {
				inputs[i].Input.Feedforward, inputs[i].Input.FeedforwardKnown = d.Pace, true
			}
		}
	}
	res := o.Update(inputs)
	lim := tc.recordSignals(views, res, sigs, measured)
	if w.sample.Err == nil && len(errs) > 0 {
		r.Err = errors.Join(errs...) // the loop's own error, if any, is reported by compute
	}
	st.Limiting, st.Signals = res.Limiting, sigs
	st.Stale, st.StaleSince = sigs[lim].Stale, sigs[lim].StaleSince
	r.Limiting, r.Stale = res.Limiting, st.Stale
	out := res.Outputs[res.Limiting]
	out.Rate = res.Rate
	return out
}

// recordSignals records the override's outcome res in every signal's
// record sigs (in views' order) and in the report, and returns the index of
// the signal that limited the rate.
func (tc *tickCtx) recordSignals(views []signalView, res control.OverrideOutput, sigs []SignalState, measured []float64) int {
	lim := 0
	for i, v := range views {
		out := res.Outputs[v.name]
		sigs[i].Terms, sigs[i].Tracking = out, v.name != res.Limiting
		if v.ownState {
			sigs[i].Controller = v.c.State
		}
		if sigs[i].Drain != nil {
			sigs[i].Drain.Record(tc.now, res.Rate)
		}
		if v.name == res.Limiting {
			lim = i
		}
		tc.r.Signals = append(tc.r.Signals, SignalReport{Name: v.name, Unit: sigs[i].Unit, Setpoint: sigs[i].Setpoint,
			Measured: measured[i], Rate: out.Rate, Stale: sigs[i].Stale, Tracking: sigs[i].Tracking})
	}
	return lim
}

// signalInput is one signal's input to the override: with a stale metric,
// no measurement, and the stale policy that says what the signal allows
// (fail-closed to min_rate when it limited the rate); on the first fresh
// tick after a stale period, a bumpless resume from the rate in force (the
// controller tracks it, as a one-signal loop does). It keeps the signal's
// stale record in sig.
func (tc *tickCtx) signalInput(c *control.Controller, q Params, sig *SignalState, in control.Input, fresh, limiting bool) control.SignalInput {
	now, dt, prevRate := tc.now, tc.dt, tc.st.Rate // st.Rate is still the last tick's
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
