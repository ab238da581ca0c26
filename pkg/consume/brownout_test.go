package consume_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// ratioSink answers per message by its position in the batch: the first
// `store` of every ten are stored, the next `poison` refused for good, the
// rest failed transiently (429), as a destination in a brownout or one
// that refuses everything after a schema change. It counts its calls.
type ratioSink struct {
	store, poison int
	calls, seen   int
}

func (s *ratioSink) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	s.calls++
	out := make([]consume.Result, len(msgs))
	for i := range msgs {
		s.seen++
		switch k := i % 10; {
		case k < s.store:
		case k < s.store+s.poison:
			out[i] = consume.Result{Outcome: consume.Permanent, Reason: "HTTP 400: unknown column"}
		default:
			out[i] = consume.Result{Outcome: consume.Retryable, Reason: "HTTP 429"}
		}
	}
	return out, nil
}

// loggedConsumer is newConsumer on a fresh clock, at a rate that never
// waits, with its log kept in the buffer returned.
func loggedConsumer(sink consume.Sink) (*consume.Consumer, *fakeClock, *bytes.Buffer) {
	clk, buf := newFakeClock(), &bytes.Buffer{}
	store := memqueue.NewRates()
	store.Put(protocol.Rate{Loop: "l", PerSecond: 1e6})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", SafeRate: 1}, store, nil, clk, nil, nil)
	log := slog.New(slog.NewTextHandler(buf, nil))
	return consume.New(consume.Config{BatchSize: 10}, rc, sink, clk, log, nil), clk, buf
}

// tenFresh returns ten fresh valid messages named after the batch.
func tenFresh(b int) []consume.Message {
	out := make([]consume.Message, 10)
	for i := range out {
		out[i] = consume.Message{ID: fmt.Sprintf("b%d-%d", b, i), Body: []byte(`{}`), ReceiveCount: 1}
	}
	return out
}

// A brownout (nine messages in ten answered 429, every batch storing one)
// never fails a batch whole, so the rule on whole batches never opened the
// circuit while every message's attempts ran out. The ratio of transient
// failures over the recent messages opens it, and once open the consumer
// hands batches back untried: no store, nothing in Retry, so no delivery
// attempt spent on a destination that fails most of them.
func TestBrownoutOpensTheCircuit(t *testing.T) {
	sink := &ratioSink{store: 1}
	c, _, buf := loggedConsumer(sink)
	ctx := context.Background()
	opened := -1
	for b := range 10 {
		rep := c.Process(ctx, tenFresh(b))
		if c.Breaker().State() == consume.CircuitOpen {
			opened = b
			if len(rep.Stored) != 1 || len(rep.Retry) != 9 {
				t.Fatalf("batch %d: stored %d retry %d; want 1 and 9", b, len(rep.Stored), len(rep.Retry))
			}
			break
		}
	}
	if opened < 0 {
		t.Fatalf("after 10 batches with 90%% of messages failed transiently the circuit is %s; want open", c.Breaker().State())
	}
	if want := consume.DefaultBreakerMinResults/10 - 1; opened != want {
		t.Errorf("circuit opened after batch %d; want %d (the window's minimum count reached)", opened, want)
	}
	calls := sink.calls
	rep := c.Process(ctx, tenFresh(99))
	if sink.calls != calls || len(rep.Deferred) != 10 || len(rep.Retry) != 0 || rep.DeferFor <= 0 {
		t.Errorf("open circuit: sink calls %d -> %d, deferred %d retry %d defer for %v; want no call, 10 deferred, 0 retry, a wait",
			calls, sink.calls, len(rep.Deferred), len(rep.Retry), rep.DeferFor)
	}
	if !strings.Contains(buf.String(), "fails most messages transiently") {
		t.Errorf("log does not say why the circuit opened:\n%s", buf.String())
	}
}

// Once the brownout ends, the half-open probe that stores closes the
// circuit and starts the window over: healthy batches flow and the old
// failures do not open it again.
func TestBrownoutEndsAfterAProbe(t *testing.T) {
	sink := &ratioSink{store: 1}
	c, clk, _ := loggedConsumer(sink)
	ctx := context.Background()
	for b := 0; c.Breaker().State() != consume.CircuitOpen; b++ {
		if b == 10 {
			t.Fatal("circuit never opened")
		}
		c.Process(ctx, tenFresh(b))
	}
	sink.store = 10
	clk.Advance(c.Breaker().Wait())
	if n := c.ReceiveSize(ctx); n != 1 {
		t.Fatalf("half-open ReceiveSize() = %d; want 1 (a probe)", n)
	}
	if rep := c.Process(ctx, tenFresh(50)[:1]); len(rep.Stored) != 1 {
		t.Fatalf("probe: stored %d deferred %d; want 1 stored", len(rep.Stored), len(rep.Deferred))
	}
	for b := range 5 {
		rep := c.Process(ctx, tenFresh(60+b))
		if len(rep.Stored) != 10 || c.Breaker().State() != consume.CircuitClosed {
			t.Fatalf("healthy batch %d after the probe: stored %d, circuit %s; want 10, closed", b, len(rep.Stored), c.Breaker().State())
		}
	}
}

// A destination that refuses everything as poison (a schema change, a
// proxy answering 400 to all) is at fault, not the messages: past the
// window's minimum count the consumer opens the circuit and holds the
// refused messages (Deferred) instead of dead-lettering them, and says why.
func TestMassPoisonIsHeldNotDeadLettered(t *testing.T) {
	sink := &ratioSink{poison: 10}
	c, clk, buf := loggedConsumer(sink)
	ctx := context.Background()
	dead, held := 0, 0
	for b := range 10 {
		clk.Advance(c.Breaker().Wait())
		rep := c.Process(ctx, tenFresh(b))
		dead += len(rep.Poison)
		held += len(rep.Deferred)
	}
	if dead >= consume.DefaultBreakerMinResults {
		t.Errorf("dead-lettered %d of %d messages refused by a destination refusing all; want fewer than %d",
			dead, sink.seen, consume.DefaultBreakerMinResults)
	}
	if held == 0 || c.Breaker().State() == consume.CircuitClosed {
		t.Errorf("held %d, circuit %s; want messages held and the circuit not closed", held, c.Breaker().State())
	}
	if !strings.Contains(buf.String(), "the destination refuses most messages as poison") ||
		!strings.Contains(buf.String(), "messages are held, not dead-lettered") {
		t.Errorf("log does not give the mass-poison reason:\n%s", buf.String())
	}
}

// One message in ten refused among healthy ones is that message's fault:
// each is dead-lettered once, with its reason, and the circuit stays closed.
func TestLonePoisonIsStillDeadLettered(t *testing.T) {
	sink := &ratioSink{store: 9, poison: 1}
	c, _, _ := loggedConsumer(sink)
	ctx := context.Background()
	for b := range 10 {
		rep := c.Process(ctx, tenFresh(b))
		if len(rep.Stored) != 9 || len(rep.Poison) != 1 || len(rep.Deferred) != 0 {
			t.Fatalf("batch %d: stored %d poison %d deferred %d; want 9 1 0", b, len(rep.Stored), len(rep.Poison), len(rep.Deferred))
		}
		if p := rep.Poison[0]; p.Reason != "HTTP 400: unknown column" {
			t.Errorf("batch %d: poison reason %q; want the sink's", b, p.Reason)
		}
		if st := c.Breaker().State(); st != consume.CircuitClosed {
			t.Fatalf("batch %d: circuit %s; want closed", b, st)
		}
	}
}

// brownoutSink fails nine messages in ten transiently until the clock
// reaches end, then stores everything; it keeps the most deliveries
// (ReceiveCount) any message had when it was tried.
type brownoutSink struct {
	clk     *fakeClock
	end     time.Time
	seen    int
	stored  map[string]bool
	maxRecv int
}

func (s *brownoutSink) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	out := make([]consume.Result, len(msgs))
	for i, m := range msgs {
		s.seen++
		s.maxRecv = max(s.maxRecv, m.ReceiveCount)
		if s.clk.Now().Before(s.end) && s.seen%10 != 0 {
			out[i] = consume.Result{Outcome: consume.Retryable, Reason: "HTTP 503"}
			continue
		}
		s.stored[m.ID] = true
	}
	return out, nil
}

// Through a minute of brownout the worker loop stores every message once
// and spends few deliveries: the open circuit keeps the consumer from
// receiving, instead of cycling every message through the failing
// destination at the paced rate (before the ratio rule: 2,000 tries for
// 200 messages, one of them delivered 218 times). memqueue hands a
// released message straight back, so the half-open probes all take the
// same message (an SQS source delays it by its receive count, and the
// next probe takes another): that one is delivered about once per probe.
func TestRunThroughABrownoutSpendsFewDeliveries(t *testing.T) {
	clk := newFakeClock()
	q := memqueue.New()
	const n = 200
	for i := range n {
		q.Send(fmt.Appendf(nil, `{"i":%d}`, i))
	}
	sink := &brownoutSink{clk: clk, end: clk.Now().Add(time.Minute), stored: map[string]bool{}}
	c, _ := newConsumer(clk, 100, sink)
	runUntilDrained(t, c, q)
	if _, _, acked, dead := q.Counts(); acked != n || dead != 0 || len(sink.stored) != n {
		t.Errorf("acked %d dead %d stored %d; want %d 0 %d", acked, dead, len(sink.stored), n, n)
	}
	if sink.seen > 2*n || sink.maxRecv > 15 {
		t.Errorf("through a 60 s brownout: %d tries for %d messages, one delivered %d times; want at most %d tries, 15 deliveries",
			sink.seen, n, sink.maxRecv, 2*n)
	}
}
