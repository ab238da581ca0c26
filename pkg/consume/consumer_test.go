package consume_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

func newConsumer(clk consume.Clock, rate float64, sink consume.Sink) (*consume.Consumer, *memqueue.Rates) {
	store := memqueue.NewRates()
	store.Put(protocol.Rate{Loop: "l", PerSecond: rate})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", SafeRate: 1}, store, nil, clk, nil, nil)
	return consume.New(consume.Config{BatchSize: 10}, rc, sink, clk, nil, nil), store
}

func msgs(bodies ...string) []consume.Message {
	out := make([]consume.Message, len(bodies))
	for i, b := range bodies {
		out[i] = consume.Message{ID: fmt.Sprintf("id-%d", i), Body: []byte(b)}
	}
	return out
}

func ids(ms []consume.Message) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.ID)
	}
	return strings.Join(s, ",")
}

func TestProcess(t *testing.T) {
	refuseID1 := func(m consume.Message) string {
		if m.ID == "id-1" {
			return "HTTP 422: bad order"
		}
		return ""
	}
	tests := []struct {
		name                     string
		bodies                   []string
		down                     bool
		refuse                   func(consume.Message) string
		cancel                   bool
		stored, retry, poisonIDs string
	}{
		{name: "all stored", bodies: []string{`{"a":1}`, `{"b":2}`}, stored: "id-0,id-1"},
		{name: "malformed is poison", bodies: []string{`{"a":1}`, `not json`, `[1]`}, stored: "id-0", poisonIDs: "id-1,id-2"},
		{name: "sink down releases all", bodies: []string{`{"a":1}`, `{"b":2}`}, down: true, retry: "id-0,id-1"},
		{name: "sink refuses one", bodies: []string{`{"a":1}`, `{"b":2}`, `{}`}, refuse: refuseID1, stored: "id-0,id-2", poisonIDs: "id-1"},
		{name: "cancelled while pacing", bodies: []string{`{"a":1}`, `x`}, cancel: true, retry: "id-0", poisonIDs: "id-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := memqueue.NewSink()
			sink.SetDown(tt.down)
			sink.Refuse = tt.refuse
			c, _ := newConsumer(newFakeClock(), 10, sink)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				c.ReceiveSize(ctx)      // reads the rate
				c.Pacer().Wait(ctx, 10) // spends the burst: the next batch must wait
				cancel()
			}
			rep := c.Process(ctx, msgs(tt.bodies...))
			var poison []consume.Message
			for _, p := range rep.Poison {
				if p.Reason == "" {
					t.Errorf("poison %s has no reason", p.Message.ID)
				}
				poison = append(poison, p.Message)
			}
			if ids(rep.Stored) != tt.stored || ids(append(rep.Retry, rep.Deferred...)) != tt.retry || ids(poison) != tt.poisonIDs {
				t.Errorf("Process() stored [%s] retry [%s] poison [%s]; want [%s] [%s] [%s]",
					ids(rep.Stored), ids(append(rep.Retry, rep.Deferred...)), ids(poison), tt.stored, tt.retry, tt.poisonIDs)
			}
			if got := sink.Len(); got != len(rep.Stored) {
				t.Errorf("sink holds %d; want %d", got, len(rep.Stored))
			}
		})
	}
}

// flakySink fails every third Store.
type flakySink struct {
	*memqueue.Sink
	calls atomic.Int64
}

func (s *flakySink) Store(ctx context.Context, m []consume.Message) ([]consume.Result, error) {
	if s.calls.Add(1)%3 == 0 {
		return nil, fmt.Errorf("injected failure")
	}
	return s.Sink.Store(ctx, m)
}

func TestRunLosesNothing(t *testing.T) {
	clk := newFakeClock()
	q := memqueue.New()
	const n, poisonEvery = 500, 50
	for i := range n {
		if i%poisonEvery == 0 {
			q.Send([]byte("garbage"))
		} else {
			q.Send(fmt.Appendf(nil, `{"i":%d}`, i))
		}
	}
	sink := &flakySink{Sink: memqueue.NewSink()}
	c, _ := newConsumer(clk, 100, sink)
	runUntilDrained(t, c, q)
	_, _, acked, dead := q.Counts()
	wantPoison := n / poisonEvery
	if sink.Len() != n-wantPoison || acked != n-wantPoison || dead != wantPoison || sink.Redelivered() != 0 {
		t.Errorf("stored %d acked %d dead %d redelivered %d; want %d %d %d 0", sink.Len(), acked, dead, sink.Redelivered(), n-wantPoison, n-wantPoison, wantPoison)
	}
	// Paced at 100/s: 450 stored messages take at least 4.4 s of virtual time.
	if el := clk.Now().Sub(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); el < 4400*time.Millisecond {
		t.Errorf("virtual time %v; want >= 4.4s at 100/s", el)
	}
	st := c.Stats()
	if st.Stored.Load() != int64(n-wantPoison) || st.Poison.Load() != int64(wantPoison) || st.Failed.Load() == 0 {
		t.Errorf("stats stored %d poison %d failed %d", st.Stored.Load(), st.Poison.Load(), st.Failed.Load())
	}
}

// runUntilDrained runs c on q until q holds nothing ready or in flight,
// then stops it; it fails t when q is not drained in 10 s of real time.
func runUntilDrained(t *testing.T, c *consume.Consumer, q *memqueue.Queue) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(ctx, q) }()
	deadline := time.After(10 * time.Second)
	for {
		ready, inflight, _, _ := q.Counts()
		if ready == 0 && inflight == 0 {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("queue not drained: ready %d in flight %d", ready, inflight)
		case <-time.After(time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run() = %v", err)
	}
}
