package main

import (
	"fmt"
)

// boundsLoop is the loop of the operator scenarios: its own PARAMS, the
// same metric as the e2e loop (CPU 60).
const boundsLoop = "bounds"

// editLoop applies edit to a loop's PARAMS (read, change, write).
func (r *run) editLoop(id string, edit func(p map[string]any)) error {
	p, err := r.store.ReadParams(r.Ctx, id)
	if err != nil {
		return err
	}
	edit(p)
	return r.store.WriteParams(r.Ctx, id, p)
}

// tickRate ticks once and returns the loop's RATE.
func (r *run) tickRate(id string) (float64, error) {
	r.waitDue()
	if _, err := r.invoke(0); err != nil {
		return 0, err
	}
	rate, err := r.store.ReadRate(r.Ctx, id)
	if err != nil {
		return 0, err
	}
	return rate.PerSecond, nil
}

// operators runs the operators' edits on a loop whose rate sits at its
// maximum (setpoint 90 with CPU at 60): max_rate lowered, then the
// setpoint lowered below the CPU; then a switch to manual far below the
// rate with a slew limit in force.
func (r *run) operators() error {
	base, err := r.store.ReadParams(r.Ctx, loopID)
	if err != nil {
		return err
	}
	p := map[string]any{}
	for k, v := range base {
		p[k] = v
	}
	p["mode"], p["setpoint"], p["max_rate"], p["slew_limit"] = "auto", 90.0, 1000.0, 0.0
	delete(p, "manual_rate")
	if err := r.store.WriteParams(r.Ctx, boundsLoop, p); err != nil {
		return err
	}
	rate := 0.0
	for i := 0; i < 8 && rate < 1000; i++ {
		if rate, err = r.tickRate(boundsLoop); err != nil {
			return err
		}
	}
	if rate < 1000 {
		r.Fail("bounds: rate %v after 8 ticks with CPU 60 under setpoint 90; want max_rate 1000", rate)
		return nil
	}
	r.boundsEdit()
	return r.manualNextTick()
}

// boundsEdit: max_rate 1000 -> 500 while the rate sits at 1000: at most 500
// at the next tick; then the setpoint 90 -> 40 (CPU 60 above it): below
// 500 within two ticks (the integrator was clamped into the new bounds,
// nothing to unwind).
func (r *run) boundsEdit() {
	check := func() error {
		if err := r.editLoop(boundsLoop, func(p map[string]any) { p["max_rate"] = 500.0 }); err != nil {
			return err
		}
		rate, err := r.tickRate(boundsLoop)
		if err != nil {
			return err
		}
		if rate > 500 {
			return fmt.Errorf("rate %v at the tick after max_rate 1000 -> 500; want at most 500", rate)
		}
		if err := r.editLoop(boundsLoop, func(p map[string]any) { p["setpoint"] = 40.0 }); err != nil {
			return err
		}
		var rates []float64
		for range 2 {
			if rate, err = r.tickRate(boundsLoop); err != nil {
				return err
			}
			rates = append(rates, rate)
			if rate < 500 {
				r.Logf("bounds edit followed: at most 500 at once, %v after the setpoint fell below the CPU", rates)
				return nil
			}
		}
		return fmt.Errorf("rates %v in the 2 ticks after the setpoint 90 -> 40 with CPU 60; want below the new max_rate 500", rates)
	}
	if err := check(); err != nil {
		r.Fail("bounds_edit_followed: %v", err)
		return
	}
	r.Res.BoundsEditFollowed = true
}

// manualNextTick: with a slew limit of 50/tick, a switch to manual at 20
// while the rate is far above it is in RATE at the next tick.
func (r *run) manualNextTick() error {
	if err := r.editLoop(boundsLoop, func(p map[string]any) { p["setpoint"], p["slew_limit"] = 90.0, 50.0 }); err != nil {
		return err
	}
	before, err := r.tickRate(boundsLoop)
	if err != nil {
		return err
	}
	if err := r.editLoop(boundsLoop, func(p map[string]any) { p["mode"], p["manual_rate"] = "manual", 20.0 }); err != nil {
		return err
	}
	rate, err := r.tickRate(boundsLoop)
	if err != nil {
		return err
	}
	r.Res.ManualRateNextTick = rate == 20
	if !r.Res.ManualRateNextTick {
		r.Fail("manual_rate_next_tick: RATE %v -> %v at the tick after a switch to manual 20 (slew_limit 50); want 20", before, rate)
	}
	return nil
}
