package kafkasource_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// stuckSink fails one id with a retryable error on every try and counts
// its attempts; it stores everything else.
type stuckSink struct {
	*memqueue.Sink
	stuck    string
	mu       sync.Mutex
	attempts int
}

func (s *stuckSink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	var rest []consume.Message
	idx := -1
	for i, m := range msgs {
		if m.ID == s.stuck {
			idx = i
			s.mu.Lock()
			s.attempts++
			s.mu.Unlock()
			continue
		}
		rest = append(rest, m)
	}
	res, err := s.Sink.Store(ctx, rest)
	if err != nil || idx < 0 {
		return res, err
	}
	out := append([]consume.Result{}, res[:idx]...)
	out = append(out, consume.Result{Outcome: consume.Retryable, Reason: "HTTP 503 Service Unavailable"})
	return append(out, res[idx:]...), nil
}

// TestStuckRecordRetriedThenDeadLettered: a record that fails with a
// retryable error on every try is retried with backoff a bounded number of
// times and then goes to the dead-letter topic with the reason; it never
// stalls the other records, and its partition's commit moves past it.
func TestStuckRecordRetriedThenDeadLettered(t *testing.T) {
	const topic, group = "stuck", "stuck-g"
	c := newFake(t, topic, 4)
	brokers := c.ListenAddrs()
	ids := produce(t, brokers, topic, "s", 0, 200, nil)
	sink := &stuckSink{Sink: memqueue.NewSink(), stuck: ids[17]}
	w := startWorkerWith(t, sink, 1e6, consume.Config{BatchSize: 20}, kafkasource.Config{
		Brokers: brokers, Topics: []string{topic}, Group: group, CommitInterval: -1,
		MaxAttempts: 4, RetryBackoff: consume.Backoff{Base: 20 * time.Millisecond, Max: 100 * time.Millisecond},
	})
	waitFor(t, 30*time.Second, "199 stored and the stuck record dead-lettered", func() bool {
		return sink.Len() == 199 && w.src.Stats().DeadLettered.Load() == 1
	})
	w.stop()
	if sink.attempts != 4 {
		t.Errorf("stuck record tried %d times; want MaxAttempts 4", sink.attempts)
	}
	dlt := readAll(t, brokers, topic+".dlt")
	if len(dlt) != 1 {
		t.Fatalf("dead-letter topic holds %d records; want 1", len(dlt))
	}
	for _, h := range dlt[0].Headers {
		if h.Key == kafkasource.HeaderReason && !strings.Contains(string(h.Value), "retries exhausted") {
			t.Errorf("reason %q; want retries exhausted", h.Value)
		}
	}
	if total, offs := committedTotal(t, brokers, group, topic); total != 200 {
		t.Errorf("committed offsets %v sum to %d; want 200 (past the dead-lettered record)", offs, total)
	}
}
