package main

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// actualRate samples the stored counter and reports the stored rate over the
// last sampling period.
type actualRate struct {
	mu   sync.Mutex
	rate float64
}

func (a *actualRate) run(ctx context.Context, stats *consume.Stats, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	last, lastAt := stats.Stored.Load(), time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			n := stats.Stored.Load()
			a.mu.Lock()
			a.rate = float64(n-last) / now.Sub(lastAt).Seconds()
			a.mu.Unlock()
			last, lastAt = n, now
		}
	}
}

func (a *actualRate) get() float64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rate
}

// depthGauge holds the last queue depth or lag read.
type depthGauge struct {
	mu    sync.Mutex
	depth float64
}

func (d *depthGauge) run(ctx context.Context, read func(context.Context) (int, error), every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if n, err := read(ctx); err == nil {
			d.mu.Lock()
			d.depth = float64(n)
			d.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (d *depthGauge) get() float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.depth
}

func finite(f float64) float64 {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return -1 // unlimited
	}
	return f
}

// reasonKinds are the values of the dead-lettered counter's reason label
// (consume.ReasonKind).
var reasonKinds = []string{"malformed", "refused", "id_collision", "retries_exhausted"}

// registry exports the consumer's counters and gauges, and src's: the
// records it dead-lettered itself after too many attempts (Kafka), the
// poison its dead-letter queue refused (SQS).
func registry(stats *consume.Stats, actual *actualRate, depth *depthGauge, src counted, labels prometheus.Labels) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	counter := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f))
	}
	gauge := func(name, help string, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels}, f))
	}
	counter("sluice_consumer_consumed_total", "Messages received from the source.", func() float64 { return float64(stats.Consumed.Load()) })
	counter("sluice_consumer_stored_total", "Messages stored by the sink and acknowledged.", func() float64 { return float64(stats.Stored.Load()) })
	counter("sluice_consumer_failed_total", "Messages released for redelivery (not stored).", func() float64 { return float64(stats.Failed.Load()) })
	counter("sluice_consumer_poison_total", "Messages sent to the dead-letter path.", func() float64 { return float64(stats.Poison.Load()) })
	counter("sluice_consumer_retried_total", "Messages given back because the destination failed (retried later with backoff).", func() float64 { return float64(stats.Retried.Load()) })
	counter("sluice_consumer_released_total", "Messages given back untried (pacing cut short, rate zero, circuit open, shutdown).", func() float64 { return float64(stats.Deferred.Load()) })
	for _, kind := range reasonKinds {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sluice_consumer_dead_lettered_total", Help: "Messages sent to the dead-letter path, by reason.",
			ConstLabels: withLabel(labels, "reason", kind),
		}, func() float64 {
			n := stats.DeadLettered()[kind]
			if kind == "retries_exhausted" {
				n += src.exhausted()
			}
			return float64(n)
		}))
	}
	counter("sluice_consumer_dead_letter_refused_total", "Poison messages the dead-letter queue refused (KMS denied, deleted, too large): given back for redelivery; the queue's redrive policy moves them without their reason. Alarm on any.",
		func() float64 { return float64(src.dlqRefused()) })
	gauge("sluice_consumer_held", "Messages received and not yet settled, whose visibility the worker renews (SQS), or held back from the commit behind an unsettled record (Kafka).", func() float64 { return float64(src.held()) })
	counter("sluice_consumer_paced_seconds_total", "Time spent waiting for pacing slots, including pauses at a rate of zero.", func() float64 { return stats.Paced().Seconds() })
	gauge("sluice_consumer_circuit_state", "Circuit breaker on the destination: 0 closed, 1 open, 2 half-open.", func() float64 { return float64(stats.Circuit()) })
	counter("sluice_consumer_rate_fallback_total", "RATE reads that fell back to the safe rate.", func() float64 { return float64(stats.RateFallbacks.Load()) })
	gauge("sluice_consumer_allowed_rate", "Allowed aggregate rate of the loop, messages/s (-1: unlimited).", func() float64 { t, _, _ := stats.AllowedRate(); return finite(t) })
	gauge("sluice_consumer_share_rate", "This consumer's share of the allowed rate, messages/s (-1: unlimited).", func() float64 { _, s, _ := stats.AllowedRate(); return finite(s) })
	gauge("sluice_consumer_rate_fallback", "1 while the safe rate is in force.", func() float64 {
		if _, _, fb := stats.AllowedRate(); fb {
			return 1
		}
		return 0
	})
	gauge("sluice_consumer_actual_rate", "Stored messages/s over the last 5 s.", actual.get)
	gauge("sluice_consumer_queue_depth", "Approximate visible messages in the SQS queue, or the Kafka group's lag.", depth.get)
	return reg
}

// withLabel returns labels plus name=value.
func withLabel(labels prometheus.Labels, name, value string) prometheus.Labels {
	out := prometheus.Labels{name: value}
	for k, v := range labels {
		out[k] = v
	}
	return out
}
