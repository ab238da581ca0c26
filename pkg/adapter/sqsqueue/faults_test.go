package sqsqueue_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// fakeAPI records visibility changes and sent dead letters.
type fakeAPI struct {
	sqsqueue.API
	mu         sync.Mutex
	visibility map[string]int32 // receipt handle -> seconds
	sent       []types.SendMessageBatchRequestEntry
	sentTo     []string // the queue URL of each entry of sent
	// refuse fails every SendMessageBatch to a queue URL with its error.
	refuse map[string]error
	// refuseEntries fails each entry of a SendMessageBatch to a queue URL.
	refuseEntries map[string]bool
}

// sentToQueue returns the entries sent to the queue at url.
func (f *fakeAPI) sentToQueue(url string) []types.SendMessageBatchRequestEntry {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []types.SendMessageBatchRequestEntry
	for i, e := range f.sent {
		if f.sentTo[i] == url {
			out = append(out, e)
		}
	}
	return out
}

// GetQueueAttributes answers as a role without sqs:GetQueueAttributes
// would: the retention is unknown, and what is handed back while the
// destination fails keeps the retry backoff.
func (f *fakeAPI) GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	return nil, errors.New("AccessDenied: not granted to this test's role")
}

func (f *fakeAPI) ChangeMessageVisibilityBatch(_ context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.visibility == nil {
		f.visibility = map[string]int32{}
	}
	for _, e := range in.Entries {
		f.visibility[aws.ToString(e.ReceiptHandle)] = e.VisibilityTimeout
	}
	return &sqs.ChangeMessageVisibilityBatchOutput{}, nil
}

func (f *fakeAPI) SendMessageBatch(_ context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refuse[aws.ToString(in.QueueUrl)]; err != nil {
		return nil, err
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if f.refuseEntries[aws.ToString(in.QueueUrl)] {
			out.Failed = append(out.Failed, types.BatchResultErrorEntry{Id: e.Id, Code: aws.String("KMS.AccessDeniedException"), SenderFault: true})
			continue
		}
		f.sent, f.sentTo = append(f.sent, e), append(f.sentTo, aws.ToString(in.QueueUrl))
		out.Successful = append(out.Successful, types.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeAPI) DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	return &sqs.DeleteMessageBatchOutput{}, nil
}

func handlerAt(rate float64, sink consume.Sink, api *fakeAPI) *sqsqueue.Handler {
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "orders", PerSecond: rate})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", SafeRate: 1}, rates, nil, consume.WallClock{}, nil, nil)
	return &sqsqueue.Handler{
		Consumer: consume.New(consume.Config{}, rc, sink, consume.WallClock{}, nil, nil), Loop: "orders",
		API: api, QueueURL: "http://sqs/q", DeadLetterURL: "http://sqs/dlq",
	}
}

// TestHandlerAtRateZeroReturnsAtOnce: a paused loop hands the batch back at
// once (the invocation does not run to its deadline), and the messages stay
// away for a backoff that grows with their receive count, so that a pause
// does not spend maxReceiveCount in minutes.
func TestHandlerAtRateZeroReturnsAtOnce(t *testing.T) {
	api := &fakeAPI{}
	h := handlerAt(0, memqueue.NewSink(), api)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	resp, err := h.Handle(ctx, loadEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Handle at rate 0 took %v; want it to return at once", took)
	}
	if len(resp.BatchItemFailures) != 2 {
		t.Errorf("failures %v; want the 2 healthy messages back", resp.BatchItemFailures)
	}
	ev := loadEvent(t)
	for _, r := range []int{0, 2} {
		got := api.visibility[ev.Records[r].ReceiptHandle]
		if got < 30 {
			t.Errorf("record %d at rate 0: visibility %d s; want >= 30 s (paused backoff)", r, got)
		}
	}
}

// TestHandlerSinkDownBacksOffByReceiveCount: messages the destination failed
// come back after a visibility that grows with ApproximateReceiveCount.
func TestHandlerSinkDownBacksOffByReceiveCount(t *testing.T) {
	sink := memqueue.NewSink()
	sink.SetDown(true)
	ev := loadEvent(t)
	var first, fifth int32
	for _, rc := range []string{"1", "5"} {
		api := &fakeAPI{}
		h := handlerAt(1000, sink, api)
		h.Consumer = consume.New(consume.Config{}, consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", SafeRate: 1000}, memqueue.NewRates(), nil, consume.WallClock{}, nil, nil), sink, consume.WallClock{}, nil, nil)
		ev.Records[0].Attributes["ApproximateReceiveCount"] = rc
		if _, err := h.Handle(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		v := api.visibility[ev.Records[0].ReceiptHandle]
		if rc == "1" {
			first = v
		} else {
			fifth = v
		}
	}
	if first < 1 || fifth < 8*first/2 {
		t.Errorf("visibility after receive 1: %d s, after receive 5: %d s; want > 0 and growing with the receive count", first, fifth)
	}
}

// TestDeadLetterKeepsAttributes: the DLQ copy keeps the original message
// attributes beside the reason and the original id.
func TestDeadLetterKeepsAttributes(t *testing.T) {
	api := &fakeAPI{}
	ev := loadEvent(t)
	ev.Records[1].MessageAttributes = ev.Records[0].MessageAttributes // tenant=acme on the poison message
	h := handlerAt(1000, memqueue.NewSink(), api)
	if _, err := h.Handle(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	if len(api.sent) != 1 {
		t.Fatalf("sent %d dead letters; want 1", len(api.sent))
	}
	a := api.sent[0].MessageAttributes
	if aws.ToString(a["tenant"].StringValue) != "acme" || a[sqsqueue.ReasonAttribute].StringValue == nil || a["sluice-original-id"].StringValue == nil {
		t.Errorf("dead letter attributes %v; want tenant=acme, the reason and the original id", a)
	}
}

// silentAPI is an SQS endpoint that never answers: every call waits until
// its context ends.
type silentAPI struct{ fakeAPI }

func (*silentAPI) ChangeMessageVisibilityBatch(ctx context.Context, _ *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (*silentAPI) SendMessageBatch(ctx context.Context, _ *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestHandlerReturnsBeforeTheDeadlineWhenSQSIsSilent: with the destination
// down and SQS silent (the visibility change and the dead-letter send never
// answered), the handler still returns its batch item failures before the
// invocation's deadline: a Lambda run to its deadline fails the whole
// batch, and each of its messages spends a receive for nothing.
func TestHandlerReturnsBeforeTheDeadlineWhenSQSIsSilent(t *testing.T) {
	sink := memqueue.NewSink()
	sink.SetDown(true)
	h := handlerAt(1000, sink, nil)
	h.API = &silentAPI{}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := h.Handle(ctx, loadEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Errorf("Handle returned after the invocation's deadline (%v): the Lambda would have timed out", ctx.Err())
	}
	if len(resp.BatchItemFailures) == 0 {
		t.Errorf("no batch item failures; want the messages the destination failed back")
	}
}
