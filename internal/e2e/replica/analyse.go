package main

import (
	"math"
	"time"
)

// analyse computes the run's figures from the 1-s records up to end: the
// switches of the limiting signal, when lag took over for good (the last
// switch to lag, which must hold to the end), the share of the readings
// since lag first limited where it did, and the lag, CPU and rate after
// settling (from the last switch to lag + settle to end).
func (r *run) analyse(end time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.Cfg
	r.Res.LagSetpoint, r.Res.LagBand, r.Res.CPUSetpoint, r.Res.Lines = c.lagSetpoint, c.lagBand, c.cpuSetpoint, c.lines
	first, lagAt := time.Duration(-1), time.Duration(-1)
	prev := ""
	var lagged, since int
	for _, p := range r.limiting {
		if p.t > end || p.sig == "" {
			continue
		}
		if p.sig != prev {
			if prev != "" {
				r.Res.LimitingSwitches++
			}
			lagAt = -1
			if p.sig == "lag" {
				lagAt = p.t
			}
		}
		prev = p.sig
		if p.sig == "lag" && first < 0 {
			first = p.t
		}
		if first >= 0 {
			since++
			if p.sig == "lag" {
				lagged++
			}
		}
	}
	if since > 0 {
		r.Res.LagLimitingShare = round(float64(lagged) / float64(since))
	}
	r.Res.FirstLagLimitingS, r.Res.ShareAboveBand = -1, -1
	if first >= 0 {
		r.Res.FirstLagLimitingS = math.Round(first.Seconds())
	}
	for _, p := range r.lag {
		if p.t <= end {
			r.Res.MaxLag = math.Max(r.Res.MaxLag, round(p.v))
		}
	}
	if lagAt < 0 {
		r.Res.LagLimitingAtS = -1
		return
	}
	r.Res.LagLimitingAtS = math.Round(lagAt.Seconds())
	from := lagAt + c.settle
	r.settledFor = end - from
	in := func(t time.Duration) bool { return t >= from && t < end }
	mean, peak := stats(r.lag, in)
	r.Res.MeanLagAfterSettle, r.Res.MaxLagAfterSettle = round(mean), round(peak)
	n := 0
	for _, p := range r.lag {
		if in(p.t) {
			n++
			if p.v > c.lagSetpoint+c.lagBand {
				r.Res.SecondsAboveBand++
			}
		}
	}
	if n > 0 {
		r.Res.ShareAboveBand = round(float64(r.Res.SecondsAboveBand) / float64(n))
	}
	mean, peak = stats(r.cpu, in)
	r.Res.MeanCPUAfterSettle, r.Res.MaxCPUAfterSettle = round(mean), round(peak)
	mean, _ = stats(r.rate, in)
	r.Res.MeanRateSettled = round(mean)
}

// stats is the mean and maximum of the points in the window (NaN without).
func stats(ps []point, in func(time.Duration) bool) (mean, peak float64) {
	var s float64
	n := 0
	peak = math.Inf(-1)
	for _, p := range ps {
		if in(p.t) {
			s += p.v
			peak = math.Max(peak, p.v)
			n++
		}
	}
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	return s / float64(n), peak
}

// minSettled is the shortest stretch after settling the checks accept.
const minSettled = 40 * time.Second

// check records the failures of the run's acceptance.
func (r *run) check() {
	c, res := r.Cfg, &r.Res
	switch {
	case res.LagLimitingAtS < 0:
		r.Fail("the lag does not limit the rate at the end of the run")
	case r.settledFor < minSettled:
		r.Fail("lag took over for good at %g s: less than %v left after settling", res.LagLimitingAtS, minSettled)
	default:
		if math.IsNaN(res.MeanLagAfterSettle) || math.Abs(res.MeanLagAfterSettle-c.lagSetpoint) > c.lagBand {
			r.Fail("mean lag after settling %.2f s: not within %g s of its setpoint %g s", res.MeanLagAfterSettle, c.lagBand, c.lagSetpoint)
		}
		if res.ShareAboveBand < 0 || res.ShareAboveBand > c.maxAboveShare {
			r.Fail("lag above its band (%g s) for %d s after settling, a share of %.2f: more than %g", c.lagSetpoint+c.lagBand, res.SecondsAboveBand, res.ShareAboveBand, c.maxAboveShare)
		}
		if math.IsNaN(res.MeanCPUAfterSettle) || res.MeanCPUAfterSettle > c.cpuSetpoint {
			r.Fail("mean CPU after settling %.1f %% above its setpoint %g %%", res.MeanCPUAfterSettle, c.cpuSetpoint)
		}
	}
	if res.Missing > 0 || res.Duplicates > 0 || res.Stored != res.Sent {
		r.Fail("sent %d, stored %d, missing %d, duplicates %d", res.Sent, res.Stored, res.Missing, res.Duplicates)
	}
	if res.ReplicaStored != res.Stored {
		r.Fail("the replica holds %d orders, the primary %d", res.ReplicaStored, res.Stored)
	}
	if res.Ticks < 10 {
		r.Fail("only %d controller ticks", res.Ticks)
	}
}
