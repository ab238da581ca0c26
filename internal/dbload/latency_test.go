package dbload

import (
	"context"
	"strings"
	"testing"
	"time"
)

// The probe's statistics are per message: a batch of 10 that took 50 ms
// is 5 ms a message, and the percentiles are over batches.
func TestProbeConsumersStats(t *testing.T) {
	c := &probeConsumers{}
	if msgs, batches, mean, _, _ := c.stats(); msgs != 0 || batches != 0 || mean != 0 {
		t.Fatalf("empty stats = %d, %d, %g; want zeros", msgs, batches, mean)
	}
	for i := 1; i <= 10; i++ {
		c.record(time.Duration(i)*10*time.Millisecond, 10) // 1 to 10 ms a message
	}
	msgs, batches, mean, p50, p90 := c.stats()
	if msgs != 100 || batches != 10 {
		t.Errorf("msgs, batches = %d, %d; want 100, 10", msgs, batches)
	}
	if mean != 5.5 || p50 != 6 || p90 != 10 {
		t.Errorf("mean, p50, p90 = %g, %g, %g ms; want 5.5, 6, 10", mean, p50, p90)
	}
	c.reset()
	if msgs, _, _, _, _ := c.stats(); msgs != 0 {
		t.Errorf("after reset: %d messages; want 0", msgs)
	}
}

func TestLatencyProbeRefusesEmptySettings(t *testing.T) {
	for _, p := range []LatencyProbe{{Consumers: 8, Phase: time.Second}, {MsgRate: 7, Phase: time.Second}, {MsgRate: 7, Consumers: 8}} {
		if _, err := p.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "must be positive") {
			t.Errorf("Run(%+v) = %v; want a refusal", p, err)
		}
	}
}
