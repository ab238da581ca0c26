package kafkasource_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// brownoutSink fails nine records in ten transiently until end (a
// brownout: 429s and 503s), then stores everything.
type brownoutSink struct {
	*memqueue.Sink
	end  time.Time
	mu   sync.Mutex
	seen int
}

func (s *brownoutSink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	out := make([]consume.Result, len(msgs))
	var pass []consume.Message
	var at []int
	s.mu.Lock()
	for i, m := range msgs {
		s.seen++
		if time.Now().Before(s.end) && s.seen%10 != 0 {
			out[i] = consume.Result{Outcome: consume.Retryable, Reason: "HTTP 503 Service Unavailable"}
			continue
		}
		pass, at = append(pass, m), append(at, i)
	}
	s.mu.Unlock()
	res, err := s.Sink.Store(ctx, pass)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		out[i] = res[j]
	}
	return out, nil
}

// TestBrownoutExhaustsNoRecord: through a brownout (nine records in ten
// failed) long enough for the records' own bound of attempts (MaxAttempts
// 4, a backoff of 20 to 100 ms) many times over, no healthy record is
// dead-lettered as exhausted: what fails with the whole destination does
// not count against a record (consume.OutageRetrier), and after the
// brownout every record is stored and the commits reach the end. A record
// that fails on its own still does (TestStuckRecordRetriedThenDeadLettered).
func TestBrownoutExhaustsNoRecord(t *testing.T) {
	const topic, group = "brownout", "brownout-g"
	c := newFake(t, topic, 4)
	brokers := c.ListenAddrs()
	produce(t, brokers, topic, "b", 0, 200, nil)
	sink := &brownoutSink{Sink: memqueue.NewSink(), end: time.Now().Add(5 * time.Second)}
	breaker := consume.BreakerConfig{Backoff: consume.Backoff{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond}}
	w := startWorkerWith(t, sink, 1e6, consume.Config{BatchSize: 20, Breaker: breaker}, kafkasource.Config{
		Brokers: brokers, Topics: []string{topic}, Group: group, CommitInterval: -1,
		MaxAttempts: 4, RetryBackoff: consume.Backoff{Base: 20 * time.Millisecond, Max: 100 * time.Millisecond},
	})
	waitFor(t, 60*time.Second, "200 records stored or dead-lettered", func() bool {
		return int64(sink.Len())+w.src.Stats().DeadLettered.Load() >= 200
	})
	w.stop()
	if n := w.src.Stats().Exhausted.Load(); n != 0 || sink.Len() != 200 {
		t.Errorf("after a 5 s brownout: %d stored, %d exhausted and dead-lettered (%d tries); want 200 stored, none exhausted", sink.Len(), n, sink.seen)
	}
	if total, offs := committedTotal(t, brokers, group, topic); total != 200 {
		t.Errorf("committed offsets %v sum to %d; want 200", offs, total)
	}
}
