// Package consumetest is the contract test suite of the consume ports: one
// suite for every Source (memqueue, SQS, Kafka) and one for every Sink
// (memqueue, MySQL, HTTP), so that all implementations behave alike.
package consumetest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// SourceUnderTest is a fresh, empty source and a way to put messages in it.
type SourceUnderTest struct {
	Source consume.Source
	Send   func(t *testing.T, bodies ...string)
	// Quiet bounds how long a Receive waits to conclude that nothing comes.
	Quiet time.Duration
}

func receive(t *testing.T, s SourceUnderTest, want int) []consume.Message {
	t.Helper()
	var got []consume.Message
	deadline := time.Now().Add(30 * time.Second)
	for len(got) < want && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), s.Quiet)
		ms, err := s.Source.Receive(ctx, 10)
		cancel()
		if err != nil {
			t.Fatalf("Receive: %v", err)
		}
		got = append(got, ms...)
	}
	if len(got) != want {
		t.Fatalf("received %d messages; want %d", len(got), want)
	}
	sort.Slice(got, func(i, j int) bool { return string(got[i].Body) < string(got[j].Body) })
	return got
}

// TestSource checks a source: receive, ack, release (redelivered), dead
// letter (gone from the source), nothing else comes back.
func TestSource(t *testing.T, newSource func(t *testing.T) SourceUnderTest) {
	t.Run("ack release deadletter", func(t *testing.T) {
		s := newSource(t)
		s.Quiet = defaults.Positive(s.Quiet, time.Second)
		s.Send(t, `{"n":1}`, `{"n":2}`, `{"n":3}`)
		got := receive(t, s, 3)
		ids := map[string]bool{}
		for i, m := range got {
			if want := fmt.Sprintf(`{"n":%d}`, i+1); string(m.Body) != want {
				t.Errorf("body %d = %s; want %s", i, m.Body, want)
			}
			if m.ID == "" || ids[m.ID] {
				t.Errorf("message %d has id %q (empty or repeated)", i, m.ID)
			}
			ids[m.ID] = true
		}
		ctx := context.Background()
		if err := s.Source.Ack(ctx, got[:1]); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		if err := s.Source.Release(ctx, got[1:2]); err != nil {
			t.Fatalf("Release: %v", err)
		}
		if dl, ok := s.Source.(consume.DeadLetterer); ok {
			if err := dl.DeadLetter(ctx, []consume.Poison{{Message: got[2], Reason: "contract test"}}); err != nil {
				t.Fatalf("DeadLetter: %v", err)
			}
		} else if err := s.Source.Ack(ctx, got[2:]); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		again := receive(t, s, 1)
		if again[0].ID != got[1].ID || string(again[0].Body) != `{"n":2}` {
			t.Errorf("redelivered %s %s; want the released %s", again[0].ID, again[0].Body, got[1].ID)
		}
		if again[0].ReceiveCount != 0 && again[0].ReceiveCount < 2 {
			t.Errorf("redelivered ReceiveCount = %d; want >= 2", again[0].ReceiveCount)
		}
		if err := s.Source.Ack(ctx, again); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		qctx, cancel := context.WithTimeout(ctx, s.Quiet)
		defer cancel()
		if rest, err := s.Source.Receive(qctx, 10); err != nil || len(rest) != 0 {
			t.Errorf("after settling everything Receive = %d messages, %v; want none", len(rest), err)
		}
	})
}

// SinkUnderTest is a fresh, empty sink and a count of what it holds.
type SinkUnderTest struct {
	Sink  consume.Sink
	Count func(t *testing.T) int
}

// TestSink checks a sink: every message stored, and storing an id again
// (a redelivery) duplicates nothing.
func TestSink(t *testing.T, newSink func(t *testing.T) SinkUnderTest) {
	msgs := func(from, to int) []consume.Message {
		var out []consume.Message
		for i := from; i < to; i++ {
			out = append(out, consume.Message{ID: fmt.Sprintf("contract-%d", i), Body: fmt.Appendf(nil, `{"seq":%d}`, i)})
		}
		return out
	}
	t.Run("idempotent by id", func(t *testing.T) {
		s := newSink(t)
		for _, b := range [][]consume.Message{msgs(0, 5), msgs(3, 8), msgs(0, 8)} {
			res, err := s.Sink.Store(context.Background(), b)
			if err != nil {
				t.Fatalf("Store: %v", err)
			}
			if len(res) != len(b) {
				t.Fatalf("Store returned %d results for %d messages", len(res), len(b))
			}
			for i, r := range res {
				if r.Outcome != consume.Stored {
					t.Errorf("Store(%s) = %v %q; want stored", b[i].ID, r.Outcome, r.Reason)
				}
			}
		}
		if got := s.Count(t); got != 8 {
			t.Errorf("sink holds %d; want 8", got)
		}
	})
}
