package kafkasource_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/internal/testfile"
	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// fakeDeadLetters records the poison it was sent; it fails while fail is set.
type fakeDeadLetters struct {
	mu   sync.Mutex
	fail bool
	sent []consume.Poison
}

func (f *fakeDeadLetters) SendDeadLetters(_ context.Context, poison []consume.Poison) ([]consume.Message, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, errors.New("dead-letter topic unavailable")
	}
	f.sent = append(f.sent, poison...)
	out := make([]consume.Message, len(poison))
	for i, p := range poison {
		out[i] = p.Message
	}
	return out, nil
}

func lambdaHandler(rate float64, sink consume.Sink, dl kafkasource.DeadLetterSender) *kafkasource.LambdaHandler {
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "orders", PerSecond: rate})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", SafeRate: 1}, rates, nil, consume.WallClock{}, nil, nil)
	return &kafkasource.LambdaHandler{
		Consumer:    consume.New(consume.Config{}, rc, sink, consume.WallClock{}, nil, nil),
		DeadLetters: dl, Loop: "orders",
	}
}

func goldenEvent(t *testing.T) events.KafkaEvent {
	t.Helper()
	return testfile.JSON[events.KafkaEvent](t, "testdata/msk-event.json")
}

// TestLambdaHandlerGolden runs the handler on a real MSK event: the two
// good records are stored under their ids (the producer's message-id
// header, else topic/partition/offset), the malformed one is dead-lettered
// once with its reason and its headers' bytes intact, and the invocation
// succeeds.
func TestLambdaHandlerGolden(t *testing.T) {
	sink, dl := memqueue.NewSink(), &fakeDeadLetters{}
	h := lambdaHandler(1000, sink, dl)
	var emf bytes.Buffer
	h.Metrics = &emf
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Handle(ctx, goldenEvent(t)); err != nil {
		t.Fatalf("Handle = %v; want nil", err)
	}
	var line map[string]any
	if err := json.Unmarshal(emf.Bytes(), &line); err != nil || line["_aws"] == nil || line["Consumed"] != 3.0 || line["Stored"] != 2.0 || line["DeadLettered"] != 1.0 || line["Loop"] != "orders" {
		t.Errorf("EMF line %s (err %v); want _aws, Consumed 3, Stored 2, DeadLettered 1, Loop orders", emf.String(), err)
	}
	for _, id := range []string{"o-1001", "orders/1/7"} {
		if !sink.Has(id) {
			t.Errorf("sink lacks %s", id)
		}
	}
	if sink.Len() != 2 {
		t.Errorf("sink holds %d; want 2", sink.Len())
	}
	if len(dl.sent) != 1 {
		t.Fatalf("dead letters = %d; want 1", len(dl.sent))
	}
	p := dl.sent[0]
	if p.Message.ID != "orders/0/42" || !strings.HasPrefix(p.Reason, "malformed payload") {
		t.Errorf("dead letter = %s %q; want orders/0/42, malformed payload", p.Message.ID, p.Reason)
	}
	rec := p.Message.Handle.(*kgo.Record)
	if string(rec.Key) != "customer-9" || len(rec.Headers) != 1 || !bytes.Equal(rec.Headers[0].Value, []byte{0x76, 0xdc, 0x00, 0x7f, 0x80}) {
		t.Errorf("dead record key %q headers %v; want customer-9, trace=76dc007f80", rec.Key, rec.Headers)
	}
}

// TestEventMessagesUndecodable: a value that is not base64 is poison with
// its reason, not a crash or a silent drop.
func TestEventMessagesUndecodable(t *testing.T) {
	ev := events.KafkaEvent{Records: map[string][]events.KafkaRecord{"t-0": {
		{Topic: "t", Partition: 0, Offset: 2, Value: "e30="},
		{Topic: "t", Partition: 0, Offset: 1, Value: "%%%"},
	}}}
	msgs, poison := kafkasource.EventMessages(ev, "")
	if len(msgs) != 1 || msgs[0].ID != "t/0/2" || string(msgs[0].Body) != "{}" {
		t.Errorf("messages = %+v; want t/0/2 {}", msgs)
	}
	if len(poison) != 1 || poison[0].Message.ID != "t/0/1" || !strings.Contains(poison[0].Reason, "not base64") {
		t.Errorf("poison = %+v; want t/0/1 not base64", poison)
	}
}

// TestLambdaHandlerDestinationDown: while the destination fails the
// invocation fails (the mapping retries the batch) and the poison is
// dead-lettered meanwhile; once it works the retry succeeds, with nothing
// duplicated and the poison not sent twice.
func TestLambdaHandlerDestinationDown(t *testing.T) {
	sink, dl := memqueue.NewSink(), &fakeDeadLetters{}
	h := lambdaHandler(1000, sink, dl)
	ev := goldenEvent(t)
	sink.SetDown(true)
	err := h.Handle(context.Background(), ev)
	if !errors.Is(err, kafkasource.ErrNotAllStored) || !strings.Contains(err.Error(), "failed at the destination") {
		t.Fatalf("Handle with the destination down = %v; want ErrNotAllStored, failed at the destination", err)
	}
	if sink.Len() != 0 || len(dl.sent) != 1 {
		t.Errorf("stored %d, dead-lettered %d; want 0, 1", sink.Len(), len(dl.sent))
	}
	sink.SetDown(false)
	if err := h.Handle(context.Background(), ev); err != nil {
		t.Fatalf("retry = %v; want nil", err)
	}
	if sink.Len() != 2 || sink.Redelivered() != 0 || len(dl.sent) != 1 {
		t.Errorf("stored %d (redelivered %d), dead letters %d; want 2 (0), 1: the poison is not sent again", sink.Len(), sink.Redelivered(), len(dl.sent))
	}
}

// TestLambdaHandlerDeadLetterFails: when the dead-letter destination fails
// the invocation fails after storing the good records; the retry does not
// store them again (this instance remembers them) and succeeds once the
// dead letter goes.
func TestLambdaHandlerDeadLetterFails(t *testing.T) {
	var stores int
	sink := memqueue.NewSink()
	sink.OnStore = func(n int) { stores += n }
	dl := &fakeDeadLetters{fail: true}
	h := lambdaHandler(1000, sink, dl)
	ev := goldenEvent(t)
	err := h.Handle(context.Background(), ev)
	if !errors.Is(err, kafkasource.ErrNotAllStored) || !strings.Contains(err.Error(), "dead-letter topic unavailable") {
		t.Fatalf("Handle = %v; want ErrNotAllStored with the dead-letter failure", err)
	}
	if sink.Len() != 2 {
		t.Errorf("stored %d before failing; want 2", sink.Len())
	}
	dl.fail = false
	if err := h.Handle(context.Background(), ev); err != nil {
		t.Fatalf("retry = %v; want nil", err)
	}
	if stores != 2 || len(dl.sent) != 1 {
		t.Errorf("stores %d, dead letters %d; want 2 (none again on the retry), 1", stores, len(dl.sent))
	}
}

// TestLambdaHandlerNoDeadLetters: without a dead-letter destination a
// poison record fails the invocation; it is never dropped.
func TestLambdaHandlerNoDeadLetters(t *testing.T) {
	h := lambdaHandler(1000, memqueue.NewSink(), nil)
	err := h.Handle(context.Background(), goldenEvent(t))
	if !errors.Is(err, kafkasource.ErrNotAllStored) || !strings.Contains(err.Error(), "1 poison not dead-lettered") {
		t.Errorf("Handle = %v; want ErrNotAllStored, 1 poison not dead-lettered", err)
	}
}

// TestLambdaHandlerRateZero: at a rate of zero the invocation fails at once
// (it does not wait for its deadline) and stores nothing.
func TestLambdaHandlerRateZero(t *testing.T) {
	sink := memqueue.NewSink()
	h := lambdaHandler(0, sink, &fakeDeadLetters{})
	h.PacingMargin, h.HoldPoll = 100*time.Millisecond, 50*time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := h.Handle(ctx, goldenEvent(t))
	if !errors.Is(err, kafkasource.ErrNotAllStored) || !strings.Contains(err.Error(), "allowed rate is zero") {
		t.Errorf("Handle = %v; want ErrNotAllStored, allowed rate is zero", err)
	}
	if sink.Len() != 0 {
		t.Errorf("stored %d at rate 0; want 0", sink.Len())
	}
	if ctx.Err() != nil {
		t.Errorf("Handle held past the invocation's deadline at rate 0; want an answer before it")
	}
}

// TestLambdaHandlerHoldsThroughPause: a rate of zero that rises within
// the invocation's deadline costs no failed invocation: the handler holds
// and stores the batch.
func TestLambdaHandlerHoldsThroughPause(t *testing.T) {
	sink := memqueue.NewSink()
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "orders", PerSecond: 0})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", Period: 50 * time.Millisecond, SafeRate: 1}, rates, nil, consume.WallClock{}, nil, nil)
	h := &kafkasource.LambdaHandler{Consumer: consume.New(consume.Config{}, rc, sink, consume.WallClock{}, nil, nil),
		DeadLetters: &fakeDeadLetters{}, Loop: "orders", PacingMargin: 100 * time.Millisecond, HoldPoll: 20 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	timer := time.AfterFunc(300*time.Millisecond, func() { rates.Put(protocol.Rate{Loop: "orders", PerSecond: 1000}) })
	defer timer.Stop()
	if err := h.Handle(ctx, goldenEvent(t)); err != nil {
		t.Fatalf("Handle with a pause shorter than the deadline = %v; want nil (held)", err)
	}
	if sink.Len() != 2 || rates.Reads() < 2 {
		t.Errorf("stored %d after %d RATE reads; want 2 after the rate rose", sink.Len(), rates.Reads())
	}
}

// TestLambdaHandlerDeadlineShort: with a share too small for the batch
// before the deadline, the handler stores the part that fits, fails, and the
// retry on this instance goes on from there instead of pacing the stored
// records again.
func TestLambdaHandlerDeadlineShort(t *testing.T) {
	sink := memqueue.NewSink()
	h := lambdaHandler(10, sink, &fakeDeadLetters{})
	h.PacingMargin = 100 * time.Millisecond
	ev := events.KafkaEvent{Records: map[string][]events.KafkaRecord{"t-0": nil}}
	for off := int64(0); off < 40; off++ {
		ev.Records["t-0"] = append(ev.Records["t-0"], events.KafkaRecord{Topic: "t", Offset: off, Value: "e30="})
	}
	attempts := 0
	for ; attempts < 10 && sink.Len() < 40; attempts++ {
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		err := h.Handle(ctx, ev)
		cancel()
		if sink.Len() < 40 && !errors.Is(err, kafkasource.ErrNotAllStored) {
			t.Fatalf("attempt %d: Handle = %v with %d of 40 stored; want ErrNotAllStored", attempts+1, err, sink.Len())
		}
	}
	if sink.Len() != 40 || sink.Redelivered() != 0 || attempts < 2 {
		t.Errorf("stored %d (redelivered %d) in %d invocations; want 40 (0) in more than one", sink.Len(), sink.Redelivered(), attempts)
	}
}

// TestLambdaHandlerPacesInChunks: a large batch goes to the destination in
// paced chunks of at most the consumer's batch size, not as one burst once
// the last record's slot came.
func TestLambdaHandlerPacesInChunks(t *testing.T) {
	var sizes []int
	sink := memqueue.NewSink()
	sink.OnStore = func(n int) { sizes = append(sizes, n) }
	h := lambdaHandler(200, sink, &fakeDeadLetters{})
	ev := events.KafkaEvent{Records: map[string][]events.KafkaRecord{}}
	for off := int64(0); off < 50; off++ {
		p := fmt.Sprintf("t-%d", off%2)
		ev.Records[p] = append(ev.Records[p], events.KafkaRecord{Topic: "t", Partition: off % 2, Offset: off, Value: "e30="})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.Handle(ctx, ev); err != nil {
		t.Fatalf("Handle = %v; want nil", err)
	}
	if sink.Len() != 50 || len(sizes) < 5 || slices.Max(sizes) > 10 {
		t.Errorf("stored %d in stores of %v; want 50 in stores of at most 10", sink.Len(), sizes)
	}
}

// TestLambdaHandlerCircuitOpen: once the destination failed batches in a
// row, the circuit opens and the invocation fails at once, saying why,
// without trying the destination.
func TestLambdaHandlerCircuitOpen(t *testing.T) {
	sink := memqueue.NewSink()
	sink.SetDown(true)
	h := lambdaHandler(1000, sink, &fakeDeadLetters{})
	var err error
	for i := 0; i < 6 && (err == nil || !strings.Contains(err.Error(), "circuit is open")); i++ {
		err = h.Handle(context.Background(), goldenEvent(t))
	}
	if !errors.Is(err, kafkasource.ErrNotAllStored) || !strings.Contains(err.Error(), "2 deferred (the destination's circuit is open)") {
		t.Errorf("Handle with the destination down = %v; want the circuit named", err)
	}
}

// TestLambdaHandlerRememberedPerSource: the "already stored" memory names
// the event source and the record, not only topic/partition/offset: a
// record of another cluster with the same topic (a migration to MSK), or
// of a recreated topic (same offset, another record), is stored, not
// skipped as done.
func TestLambdaHandlerRememberedPerSource(t *testing.T) {
	sink := memqueue.NewSink()
	h := lambdaHandler(1000, sink, &fakeDeadLetters{})
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	event := func(arn, id string, ts time.Time) events.KafkaEvent {
		return events.KafkaEvent{EventSource: "aws:kafka", EventSourceARN: arn, Records: map[string][]events.KafkaRecord{"orders-0": {{
			Topic: "orders", Partition: 0, Offset: 7, Value: "e30=", Timestamp: events.MilliSecondsEpochTime{Time: ts},
			Headers: []map[string]events.JSONNumberBytes{{"message-id": events.JSONNumberBytes(id)}}}}}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ev := range []events.KafkaEvent{
		event("arn:aws:kafka:us-east-1:111122223333:cluster/old/1", "old-7", at),
		event("arn:aws:kafka:us-east-1:111122223333:cluster/msk/2", "msk-7", at),
		event("arn:aws:kafka:us-east-1:111122223333:cluster/msk/2", "recreated-7", at.Add(time.Hour)),
	} {
		if err := h.Handle(ctx, ev); err != nil {
			t.Fatalf("Handle(%s) = %v; want nil", ev.EventSourceARN, err)
		}
	}
	for _, id := range []string{"old-7", "msk-7", "recreated-7"} {
		if !sink.Has(id) {
			t.Errorf("record %s not stored: skipped as already stored by a record of another source", id)
		}
	}
	// The same record again (a retried batch) is still skipped.
	stores := 0
	sink.OnStore = func(int) { stores++ }
	if err := h.Handle(ctx, event("arn:aws:kafka:us-east-1:111122223333:cluster/msk/2", "msk-7", at)); err != nil || stores != 0 {
		t.Errorf("retried record: Handle = %v, %d stores; want nil and 0 (remembered)", err, stores)
	}
}

// TestLambdaHandlerHoldsThroughAnOutage: a destination that fails as a
// whole and comes back within the invocation's deadline costs no failed
// invocation (each one is a retry of the mapping, and with an on-failure
// destination AWS skips the batch after the last): the handler tries the
// failed records again within the invocation and stores them. Without a
// deadline it fails at once, as before (TestLambdaHandlerDestinationDown).
func TestLambdaHandlerHoldsThroughAnOutage(t *testing.T) {
	sink, dl := memqueue.NewSink(), &fakeDeadLetters{}
	h := lambdaHandler(1000, sink, dl)
	h.PacingMargin, h.HoldPoll = 100*time.Millisecond, 20*time.Millisecond
	sink.SetDown(true)
	timer := time.AfterFunc(500*time.Millisecond, func() { sink.SetDown(false) })
	defer timer.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Handle(ctx, goldenEvent(t)); err != nil {
		t.Fatalf("Handle through an outage shorter than the deadline = %v; want nil (held)", err)
	}
	if sink.Len() != 2 || len(dl.sent) != 1 {
		t.Errorf("stored %d, dead-lettered %d; want 2, 1", sink.Len(), len(dl.sent))
	}
}
