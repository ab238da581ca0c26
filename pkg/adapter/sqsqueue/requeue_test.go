package sqsqueue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/internal/testclock"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

const redrive5 = `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:q-dlq","maxReceiveCount":5}`

// record is an SQS event record of message id at its receives-th receive
// (receipt handle "h-"+id), with the string message attributes attrs.
func record(id string, receives int, attrs map[string]string) events.SQSMessage {
	r := events.SQSMessage{MessageId: id, ReceiptHandle: "h-" + id, Body: `{"n":"` + id + `"}`,
		Attributes:        map[string]string{"ApproximateReceiveCount": fmt.Sprint(receives), "SentTimestamp": fmt.Sprint(time.Now().UnixMilli())},
		MessageAttributes: map[string]events.SQSMessageAttribute{}}
	for k, v := range attrs {
		r.MessageAttributes[k] = events.SQSMessageAttribute{DataType: "String", StringValue: aws.String(v)}
	}
	return r
}

// openCircuit fails three batches of first receives on h (its sink down),
// a minute apart, so that its circuit is open and the destination has
// been failing for minutes.
func openCircuit(t *testing.T, h *sqsqueue.Handler, clock *testclock.Clock) {
	t.Helper()
	for i := range 3 {
		if i > 0 {
			clock.Advance(time.Minute)
		}
		handle(t, h, clock, events.SQSEvent{Records: []events.SQSMessage{record(fmt.Sprintf("warm-%d", i), 1, nil)}})
	}
	if h.Consumer.Breaker().State() != consume.CircuitOpen {
		t.Fatalf("circuit %v after three failed batches; want open", h.Consumer.Breaker().State())
	}
}

// handle runs ev on h with a deadline 3 s ahead on clock and returns the
// ids of the batch item failures.
func handle(t *testing.T, h *sqsqueue.Handler, clock *testclock.Clock, ev events.SQSEvent) map[string]bool {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(3*time.Second))
	defer cancel()
	resp, err := h.Handle(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	back := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		back[f.ItemIdentifier] = true
	}
	return back
}

// requeueHandler is lastReceiveHandler with maxReceiveCount 5 on the
// queue at url, the destination down, and its circuit open.
func requeueHandler(t *testing.T, url string) (*sqsqueue.Handler, *retentionAPI, *memqueue.Sink, *testclock.Clock) {
	h, api, sink, clock := lastReceiveHandler(1000, redrive5)
	h.QueueURL = url
	sink.SetDown(true)
	openCircuit(t, h, clock)
	return h, api, sink, clock
}

// TestFailingProbeIsRequeued: with the circuit open, a message on its
// last-but-one receive goes as the probe; the destination fails it, and
// instead of being kept invisible for 12 h it is sent again to its own
// queue (same body, its attributes, the original id and a requeue count
// of 1, delayed by the visibility it would have had, at most SQS's 15
// minutes) and reported as handled: not a batch item failure, so that
// the mapping deletes the original. The same for one on its last receive.
func TestFailingProbeIsRequeued(t *testing.T) {
	for _, receives := range []int{4, 5} {
		h, api, _, clock := requeueHandler(t, "http://sqs/q")
		var emf bytes.Buffer
		h.Metrics = &emf
		back := handle(t, h, clock, events.SQSEvent{Records: []events.SQSMessage{record("probe", receives, map[string]string{"tenant": "acme"})}})
		sent := api.sentToQueue("http://sqs/q")
		t.Logf("receive %d: back %v, requeued %d, visibility %d s", receives, back, len(sent), api.visibility["h-probe"])
		if back["probe"] {
			t.Errorf("receive %d: the requeued message is a batch item failure; want it reported as handled (the mapping deletes the original)", receives)
		}
		if len(sent) != 1 {
			t.Fatalf("receive %d: %d messages sent to the queue; want the probe requeued once", receives, len(sent))
		}
		e := sent[0]
		if aws.ToString(e.MessageBody) != `{"n":"probe"}` || aws.ToString(e.MessageAttributes["tenant"].StringValue) != "acme" {
			t.Errorf("copy body %q, attributes %v; want the original's", aws.ToString(e.MessageBody), e.MessageAttributes)
		}
		if got := aws.ToString(e.MessageAttributes[sqsqueue.RequeueAttribute].StringValue); got != "1:probe" {
			t.Errorf("copy's %s = %q; want 1:probe (one requeue, the original id)", sqsqueue.RequeueAttribute, got)
		}
		if e.DelaySeconds < 30 || e.DelaySeconds > 900 {
			t.Errorf("copy delayed %d s; want the open circuit's visibility (at least 30 s), at most 900 s", e.DelaySeconds)
		}
		if v, ok := api.visibility["h-probe"]; ok && v >= 3600 {
			t.Errorf("the requeued original got a visibility of %d s; want none (it is deleted)", v)
		}
		var line map[string]any
		if err := json.Unmarshal(emf.Bytes(), &line); err != nil || line["Requeued"] != float64(1) {
			t.Errorf("EMF line %s; want Requeued 1", emf.String())
		}
	}
}

// TestRequeueRefusedKeepsTheLastReceive: when the queue refuses the copy
// (the call fails, or SQS fails its entry), or the copy would be too
// large for SQS, the message is kept as before: a batch item failure,
// invisible for 12 h. Nothing is lost.
func TestRequeueRefusedKeepsTheLastReceive(t *testing.T) {
	for _, refuse := range []string{"call", "entry", "too large"} {
		h, api, _, clock := requeueHandler(t, "http://sqs/q")
		switch refuse {
		case "call":
			api.refuse = map[string]error{"http://sqs/q": errors.New("AccessDenied: not authorized to perform sqs:SendMessage")}
		case "entry":
			api.refuseEntries = map[string]bool{"http://sqs/q": true}
		}
		ev := events.SQSEvent{Records: []events.SQSMessage{record("probe", 4, nil)}}
		if refuse == "too large" {
			pad := 256*1024 - 10 - len(`{"pad":""}`)
			ev.Records[0].Body = `{"pad":"` + strings.Repeat("x", pad) + `"}` // fits alone, not with the requeue attribute
		}
		back := handle(t, h, clock, ev)
		vis := time.Duration(api.visibility["h-probe"]) * time.Second
		if !back["probe"] || vis < 12*time.Hour {
			t.Errorf("refused by %s: a batch item failure %v, visibility %v; want a failure kept 12 h", refuse, back["probe"], vis)
		}
	}
}

// TestRequeueCap: a copy that was requeued MaxRequeues times already (by
// default DefaultMaxRequeues) is kept for 12 h instead, so that a
// destination that never recovers ends in the keep and the dead-letter
// queue, not in a loop; one requeued fewer times is requeued once more,
// its count raised. A negative MaxRequeues never requeues.
func TestRequeueCap(t *testing.T) {
	for _, c := range []struct {
		max, before int
		requeued    bool
	}{
		{0, sqsqueue.DefaultMaxRequeues, false},
		{0, sqsqueue.DefaultMaxRequeues - 1, true},
		{3, 3, false},
		{3, 2, true},
		{-1, 0, false},
	} {
		h, api, _, clock := requeueHandler(t, "http://sqs/q")
		h.MaxRequeues = c.max
		attrs := map[string]string{}
		if c.before > 0 {
			attrs[sqsqueue.RequeueAttribute] = fmt.Sprintf("%d:orig", c.before)
		}
		back := handle(t, h, clock, events.SQSEvent{Records: []events.SQSMessage{record("copy", 4, attrs)}})
		sent := api.sentToQueue("http://sqs/q")
		vis := time.Duration(api.visibility["h-copy"]) * time.Second
		if got := len(sent) == 1 && !back["copy"]; got != c.requeued {
			t.Errorf("MaxRequeues %d, requeued %d times before: requeued %v; want %v", c.max, c.before, got, c.requeued)
		}
		if c.requeued {
			if got, want := aws.ToString(sent[0].MessageAttributes[sqsqueue.RequeueAttribute].StringValue), fmt.Sprintf("%d:orig", c.before+1); got != want {
				t.Errorf("copy's %s = %q; want %q", sqsqueue.RequeueAttribute, got, want)
			}
		} else if !back["copy"] || vis < 12*time.Hour {
			t.Errorf("MaxRequeues %d, requeued %d times before: a batch item failure %v, visibility %v; want one kept 12 h", c.max, c.before, back["copy"], vis)
		}
	}
}

// TestRequeuedRecordIsTheOriginal: a copy's message carries the original
// message id (the sinks' idempotency key: the inbox and the HTTP
// Idempotency-Key see one message), its own receive count (what the
// queue's redrive counts), and not the requeue attribute; the batch item
// failures name the record's own message id, the only one the mapping
// knows.
func TestRequeuedRecordIsTheOriginal(t *testing.T) {
	r := record("copy-id", 2, map[string]string{sqsqueue.RequeueAttribute: "3:orig-id", "tenant": "acme"})
	m := sqsqueue.FromEvent(r)
	if m.ID != "orig-id" || m.ReceiveCount != 2 || m.Attributes["tenant"] != "acme" {
		t.Errorf("FromEvent of a copy = id %q, receives %d, attributes %v; want orig-id, 2, tenant=acme", m.ID, m.ReceiveCount, m.Attributes)
	}
	if _, ok := m.Attributes[sqsqueue.RequeueAttribute]; ok {
		t.Errorf("the copy's message keeps %s; want it left out", sqsqueue.RequeueAttribute)
	}
	for _, v := range []string{"", "x:orig", "-1:orig", "2:", "2"} {
		if m := sqsqueue.FromEvent(record("own", 1, map[string]string{sqsqueue.RequeueAttribute: v})); m.ID != "own" {
			t.Errorf("%s %q: id %q; want the record's own", sqsqueue.RequeueAttribute, v, m.ID)
		}
	}

	h, _, sink, clock := lastReceiveHandler(1000, redrive5)
	sink.SetDown(true)
	back := handle(t, h, clock, events.SQSEvent{Records: []events.SQSMessage{r}})
	if !back["copy-id"] || back["orig-id"] {
		t.Errorf("destination down: failures %v; want the record's own id copy-id", back)
	}
	sink.SetDown(false)
	back = handle(t, h, clock, events.SQSEvent{Records: []events.SQSMessage{r}})
	if len(back) != 0 || !sink.Has("orig-id") || sink.Has("copy-id") {
		t.Errorf("destination up: failures %v, stored orig-id %v, copy-id %v; want stored under the original id", back, sink.Has("orig-id"), sink.Has("copy-id"))
	}
}

// TestFIFOQueueKeepsTheLastReceive: on a FIFO queue the message is kept
// for 12 h as before: a copy would lose its place in its group's order
// and its deduplication.
func TestFIFOQueueKeepsTheLastReceive(t *testing.T) {
	h, api, _, clock := requeueHandler(t, "http://sqs/q.fifo")
	back := handle(t, h, clock, events.SQSEvent{Records: []events.SQSMessage{record("probe", 4, nil)}})
	vis := time.Duration(api.visibility["h-probe"]) * time.Second
	if n := len(api.sentToQueue("http://sqs/q.fifo")); n != 0 || !back["probe"] || vis < 12*time.Hour {
		t.Errorf("FIFO: %d sent to the queue, a failure %v, visibility %v; want none sent, a failure kept 12 h", n, back["probe"], vis)
	}
}

// TestRequeueKeepsBinaryAttributes: the copy carries the original's
// attributes with their data types (Binary, Number) as they came; with
// ten attributes already there is no room for the requeue attribute, and
// the message is kept for 12 h.
func TestRequeueKeepsBinaryAttributes(t *testing.T) {
	h, api, _, clock := requeueHandler(t, "http://sqs/q")
	r := record("probe", 4, nil)
	r.MessageAttributes["blob"] = events.SQSMessageAttribute{DataType: "Binary", BinaryValue: []byte{0, 1, 2}}
	r.MessageAttributes["n"] = events.SQSMessageAttribute{DataType: "Number", StringValue: aws.String("42")}
	handle(t, h, clock, events.SQSEvent{Records: []events.SQSMessage{r}})
	sent := api.sentToQueue("http://sqs/q")
	if len(sent) != 1 {
		t.Fatalf("%d sent; want 1", len(sent))
	}
	a := sent[0].MessageAttributes
	if aws.ToString(a["blob"].DataType) != "Binary" || !bytes.Equal(a["blob"].BinaryValue, []byte{0, 1, 2}) ||
		aws.ToString(a["n"].DataType) != "Number" || aws.ToString(a["n"].StringValue) != "42" {
		t.Errorf("copy attributes %v; want blob Binary 0,1,2 and n Number 42", a)
	}

	h, api, _, clock = requeueHandler(t, "http://sqs/q")
	full := map[string]string{}
	for i := range 10 {
		full[fmt.Sprintf("a%d", i)] = "v"
	}
	back := handle(t, h, clock, events.SQSEvent{Records: []events.SQSMessage{record("probe", 4, full)}})
	if n := len(api.sentToQueue("http://sqs/q")); n != 0 || !back["probe"] || api.visibility["h-probe"] < 12*3600 {
		t.Errorf("ten attributes: %d sent, a failure %v, visibility %d s; want none sent, a failure kept 12 h", n, back["probe"], api.visibility["h-probe"])
	}
}

// TestRequeueOnALocalQueue: on the local SQS server (ElasticMQ or moto),
// the copy of a probe the destination failed on its fourth receive is in
// the queue, held back by its DelaySeconds (not received at once), then
// received with its attributes, a receive count of 1, and, through the
// mapping's event, the original message id.
func TestRequeueOnALocalQueue(t *testing.T) {
	c, url, _ := localSQS(t, 5)
	ctx := context.Background()
	if _, err := c.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String(`{"n":1}`),
		MessageAttributes: map[string]types.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")}}}); err != nil {
		t.Fatal(err)
	}
	h, _, sink, clock := lastReceiveHandler(1000, "")
	h.API, h.QueueURL, h.QueueRetention = c, url, 96*time.Hour
	// Short visibilities, so that the copy's delay is 4 to 8 s.
	h.RetryBackoff = consume.Backoff{Base: 4 * time.Second, Max: 8 * time.Second}
	h.OpenBackoff = consume.Backoff{Base: 400 * time.Millisecond, Max: 4 * time.Second}
	sink.SetDown(true)
	openCircuit(t, h, clock)
	out, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 2, VisibilityTimeout: 60,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}, MessageAttributeNames: []string{"All"}})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("receive the original: %d messages, %v", len(out.Messages), err)
	}
	ev := (&localaws.Poller{QueueURL: url}).Event(out.Messages)
	orig := ev.Records[0].MessageId
	ev.Records[0].Attributes["ApproximateReceiveCount"] = "4" // its next receive is its last
	back := handle(t, h, clock, ev)
	if back[orig] {
		t.Fatalf("the probe is a batch item failure; want it requeued")
	}
	// The mapping deletes what is not a failure.
	if _, err := c.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
		t.Fatal(err)
	}
	now, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url})
	if err != nil || len(now.Messages) != 0 {
		t.Fatalf("receive at once: %d messages, %v; want none (the copy is delayed)", len(now.Messages), err)
	}
	var got []types.Message
	for range 10 {
		later, err := c.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, WaitTimeSeconds: 2,
			MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll}, MessageAttributeNames: []string{"All"}})
		if err != nil {
			t.Fatal(err)
		}
		if got = later.Messages; len(got) > 0 {
			break
		}
	}
	if len(got) != 1 {
		t.Fatalf("the copy: %d messages within 20 s; want 1", len(got))
	}
	m := sqsqueue.FromEvent((&localaws.Poller{QueueURL: url}).Event(got).Records[0])
	t.Logf("copy %s: id %s, receives %d, attributes %v", aws.ToString(got[0].MessageId), m.ID, m.ReceiveCount, m.Attributes)
	if m.ID != orig || m.ReceiveCount != 1 || m.Attributes["tenant"] != "acme" || string(m.Body) != `{"n":1}` {
		t.Errorf("the copy's message: id %s, receives %d, attributes %v, body %s; want id %s, 1 receive, tenant=acme, the body", m.ID, m.ReceiveCount, m.Attributes, m.Body, orig)
	}
}
