package kafkasource_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// refusingDeadLetters refuses the first refuse sends (all when refuse is
// negative), then passes them to next.
type refusingDeadLetters struct {
	refuse int64
	calls  atomic.Int64
	next   *fakeDeadLetters
}

func (r *refusingDeadLetters) SendDeadLetters(ctx context.Context, poison []consume.Poison) ([]consume.Message, error) {
	if n := r.calls.Add(1); r.refuse < 0 || n <= r.refuse {
		return nil, errors.New("TOPIC_AUTHORIZATION_FAILED: not authorized to write the dead-letter topic")
	}
	return r.next.SendDeadLetters(ctx, poison)
}

// refusedInEMF returns the DeadLetterRefused of the one EMF line in b.
func refusedInEMF(t *testing.T, b []byte) int {
	t.Helper()
	var line map[string]any
	if err := json.Unmarshal(b, &line); err != nil {
		t.Fatalf("EMF line %q: %v", b, err)
	}
	n, _ := line["DeadLetterRefused"].(float64)
	return int(n)
}

// TestLambdaHandlerDeadLetterRefusedHolds: on the Kafka Lambda a dead-letter
// topic that refuses for a moment does not fail the invocation: the
// handler tries the send again within it (the mapping's retries are few
// with an on-failure destination: after them AWS skips the batch and the
// poison with it), and counts each refusal in its EMF line for an alarm.
func TestLambdaHandlerDeadLetterRefusedHolds(t *testing.T) {
	dl := &refusingDeadLetters{refuse: 3, next: &fakeDeadLetters{}}
	h := lambdaHandler(1000, memqueue.NewSink(), dl)
	h.HoldPoll, h.PacingMargin = 50*time.Millisecond, time.Second
	var emf bytes.Buffer
	h.Metrics = &emf
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Handle(ctx, goldenEvent(t)); err != nil {
		t.Fatalf("Handle with the dead-letter topic refusing 3 sends = %v; want nil (sent on the 4th try)", err)
	}
	if len(dl.next.sent) != 1 {
		t.Errorf("dead letters sent %d; want the poison once", len(dl.next.sent))
	}
	if got := refusedInEMF(t, emf.Bytes()); got != 3 {
		t.Errorf("EMF DeadLetterRefused = %d; want the 3 refusals", got)
	}
}

// TestLambdaHandlerDeadLetterRefusedBeforeDeadline: a dead-letter topic
// refusing throughout fails the invocation before its deadline (the
// mapping retries the batch), never at it, with the refusals counted.
func TestLambdaHandlerDeadLetterRefusedBeforeDeadline(t *testing.T) {
	dl := &refusingDeadLetters{refuse: -1, next: &fakeDeadLetters{}}
	h := lambdaHandler(1000, memqueue.NewSink(), dl)
	h.HoldPoll, h.PacingMargin = 100*time.Millisecond, time.Second
	var emf bytes.Buffer
	h.Metrics = &emf
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	err := h.Handle(ctx, goldenEvent(t))
	if !errors.Is(err, kafkasource.ErrNotAllStored) {
		t.Fatalf("Handle = %v; want ErrNotAllStored", err)
	}
	if ctx.Err() != nil {
		t.Errorf("Handle returned at the deadline; want before it")
	}
	if got := refusedInEMF(t, emf.Bytes()); got < 2 {
		t.Errorf("EMF DeadLetterRefused = %d; want every refusal (several tries)", got)
	}
}
