package consume_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestBreakerFailingFor: the breaker tells how long the destination has
// been failing (the outage's age, which the SQS Lambda's visibility of
// what it hands back grows with): from the first failed batch in a row,
// through the open circuit and its failed probes, until a batch stores
// (Success) or the window of recent messages shows the destination well
// again (Observe: a brownout's probe that stores does not end it); a
// failure or two long after the previous ones (the circuit closed) start a
// new outage instead of continuing an old one.
func TestBreakerFailingFor(t *testing.T) {
	clk := newFakeClock()
	b := consume.NewBreaker(consume.BreakerConfig{}, clk)
	if got := b.FailingFor(); got != 0 {
		t.Fatalf("a new breaker: FailingFor %v; want 0", got)
	}
	b.Failure()
	clk.Advance(time.Second)
	b.Failure()
	b.Failure() // opens
	clk.Advance(10 * time.Second)
	if got, st := b.FailingFor(), b.State(); got != 11*time.Second || st == consume.CircuitClosed {
		t.Errorf("11 s after the first of 3 failures: FailingFor %v, circuit %v; want 11s, not closed", got, st)
	}
	clk.Advance(b.Wait())
	b.Failure() // a failed probe
	clk.Advance(4 * time.Minute)
	if got := b.FailingFor(); got < 4*time.Minute+11*time.Second {
		t.Errorf("after a failed probe and 4 more minutes: FailingFor %v; want from the first failure", got)
	}
	b.Success()
	if got := b.FailingFor(); got != 0 {
		t.Errorf("after a batch stored: FailingFor %v; want 0", got)
	}
	b.Failure()
	clk.Advance(time.Hour) // the queue went quiet; the failure is an old one
	b.Failure()
	clk.Advance(time.Second)
	if got := b.FailingFor(); got != time.Second {
		t.Errorf("a failure an hour after the previous one (circuit closed): FailingFor %v; want 1s, a new outage", got)
	}
	b = consume.NewBreaker(consume.BreakerConfig{}, clk)
	if b.Observe(0, 30, 0) == consume.NoTrip {
		t.Fatal("30 of 30 failed transiently opened nothing")
	}
	clk.Advance(5 * time.Second)
	if got := b.FailingFor(); got != 5*time.Second {
		t.Errorf("5 s after the failure ratio opened the circuit: FailingFor %v; want 5s", got)
	}
	b.Observe(1, 0, 0) // a probe that stores
	if got, st := b.FailingFor(), b.State(); got != 5*time.Second || !b.Failing() || st != consume.CircuitClosed {
		t.Errorf("after a probe stored: FailingFor %v, failing %v, circuit %v; want 5s, true, closed: one message stored says little of a brownout", got, b.Failing(), st)
	}
	clk.Advance(time.Second)
	b.Observe(1, 9, 0) // most fail, the window too short to trip
	if got := b.FailingFor(); got != 6*time.Second {
		t.Errorf("a batch of which 9 of 10 failed after the probe: FailingFor %v; want 6s, the same outage", got)
	}
	b.Observe(10, 0, 0) // 21 in the window, 9 failed: more than a quarter
	if got := b.FailingFor(); got == 0 {
		t.Error("a window of 21 of which 9 failed: FailingFor 0; want the outage to go on")
	}
	b.Observe(10, 0, 0)
	b.Observe(10, 0, 0) // 41, 9 failed: the destination works
	if got := b.FailingFor(); got != 0 || b.Failing() {
		t.Errorf("a window of 41 of which 9 failed: FailingFor %v, failing %v; want 0, false", got, b.Failing())
	}
	// After a blip, the probe and one batch that stores all end it.
	b.Failure()
	b.Failure()
	b.Failure()
	clk.Advance(b.Wait())
	b.Observe(1, 0, 0)
	b.Observe(10, 0, 0)
	if b.Failing() {
		t.Error("a probe and a batch of 10 stored after an outage: still failing; want the outage over")
	}
}
