package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// tickPoint is one controller tick as STATE records it: when it ran, the
// lag datapoint it used (its Prometheus sample time and value) and the lag
// controller's terms. The harness writes them to ticks.csv beside the 1-s
// lag readings (lag.csv), so that the lag the controller saw can be set
// against the lag the exporter read at the same moment (docs/replica.md,
// "Where the lag's delay comes from").
type tickPoint struct {
	tick, metricAt time.Duration
	limiting       string
	rate, measured float64
	p, i, d, asked float64
	// ff and pace: the lag controller's feedforward, and the replica's
	// measured pace (drain_feedforward; 0 without).
	ff, pace float64
}

// recordTick appends STATE's tick when it is new. Called with r.mu held.
func (r *run) recordTick(st map[string]ddbtypes.AttributeValue, limiting string) {
	at, ok := st["tick_at"].(*ddbtypes.AttributeValueMemberS)
	js, ok2 := st["signals"].(*ddbtypes.AttributeValueMemberS)
	if !ok || !ok2 {
		return
	}
	tickAt, err := time.Parse(time.RFC3339Nano, at.Value)
	if err != nil {
		return
	}
	t := tickAt.Sub(r.Start)
	if n := len(r.ticks); n > 0 && r.ticks[n-1].tick == t {
		return
	}
	var sigs []loop.SignalState
	if json.Unmarshal([]byte(js.Value), &sigs) != nil {
		return
	}
	for _, s := range sigs {
		if s.Name != "lag" {
			continue
		}
		tp := tickPoint{tick: t, limiting: limiting, measured: s.Measured, p: s.Terms.P, i: s.Terms.I, d: s.Terms.D, asked: s.Terms.Rate, ff: s.Terms.FF}
		if s.Drain != nil {
			tp.pace = s.Drain.Pace
		}
		if !s.MetricAt.IsZero() {
			tp.metricAt = s.MetricAt.Sub(r.Start)
		}
		if n := len(r.rate); n > 0 {
			tp.rate = r.rate[n-1].v
		}
		r.ticks = append(r.ticks, tp)
	}
}

// writeTrace writes ticks.csv, lag.csv and heartbeat.csv (each heartbeat
// write on the primary: when it started, how long it took) into the run's
// log directory.
func (r *run) writeTrace() {
	r.mu.Lock()
	defer r.mu.Unlock()
	dir := filepath.Join(r.Cfg.LogDir, r.id)
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	if f, err := os.Create(filepath.Join(dir, "ticks.csv")); err == nil {
		fmt.Fprintln(f, "tick_s,metric_at_s,limiting,rate,lag_measured,p,i,d,lag_asked,ff,pace")
		for _, t := range r.ticks {
			fmt.Fprintf(f, "%.3f,%.3f,%s,%g,%g,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f\n", t.tick.Seconds(), t.metricAt.Seconds(), t.limiting, t.rate, t.measured, t.p, t.i, t.d, t.asked, t.ff, t.pace)
		}
		f.Close()
	}
	if f, err := os.Create(filepath.Join(dir, "heartbeat.csv")); err == nil {
		fmt.Fprintln(f, "t_s,write_s")
		for _, p := range r.hbWrites {
			fmt.Fprintf(f, "%.3f,%.4f\n", p.t.Seconds(), p.v)
		}
		f.Close()
	}
	if f, err := os.Create(filepath.Join(dir, "lag.csv")); err == nil {
		fmt.Fprintln(f, "t_s,lag,seconds_behind_master")
		for i, p := range r.lag {
			fmt.Fprintf(f, "%.3f,%g,%g\n", p.t.Seconds(), p.v, r.behind[i].v)
		}
		f.Close()
	}
}
