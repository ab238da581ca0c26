package sqsqueue_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/testclock"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// TestVeryLongOutageKeepsTheLastReceive: through outages of 2 and 6 hours
// with the mapping polling all along (no controller holds it off: the
// worst case) and every visibility drawn at its shortest, no healthy
// message is dead-lettered, on one instance and on a fresh instance for
// every invocation, and all are stored after it: a message whose next
// receive is its last (maxReceiveCount from the queue's RedrivePolicy) is
// handed back for as long as SQS allows (12 h), so that its last receive
// comes after the outage.
func TestVeryLongOutageKeepsTheLastReceive(t *testing.T) {
	for _, outage := range []time.Duration{2 * time.Hour, 6 * time.Hour} {
		for _, fresh := range []bool{false, true} {
			s := newMappingSim(200, outage, lowest, lowest)
			s.run(t, outage, fresh)
			during := s.maxReceives()
			s.run(t, 36*time.Hour, fresh) // what is kept from its last receive returns after 12 h
			last, ok := s.lastStored()
			t.Logf("%v outage, fresh instances %v: at most %d receives during it, %d in all, %d dead-lettered; last stored %v after its start",
				outage, fresh, during, s.maxReceives(), s.deadLettered, last)
			if !ok || s.deadLettered > 0 || during >= s.maxReceiveCount {
				t.Errorf("%v outage, fresh instances %v: all stored %v, %d dead-lettered, %d receives during it; want all stored, none dead-lettered, fewer than %d receives during it",
					outage, fresh, ok, s.deadLettered, during, s.maxReceiveCount)
			}
		}
	}
}

// lastReceiveHandler is a Handler at rate on virtual time, on a queue
// with the redrive policy redrive ("" for none) and 14 days' retention.
func lastReceiveHandler(rate float64, redrive string) (*sqsqueue.Handler, *retentionAPI, *memqueue.Sink, *testclock.Clock) {
	clock := testclock.New(time.Now())
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "orders", PerSecond: rate})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", SafeRate: 1}, rates, nil, clock, nil, nil)
	sink := memqueue.NewSink()
	api := &retentionAPI{retention: 14 * 24 * time.Hour, redrive: redrive}
	h := &sqsqueue.Handler{Consumer: consume.New(consume.Config{}, rc, sink, clock, nil, nil), Loop: "orders",
		API: api, QueueURL: "http://sqs/q", DeadLetterURL: "http://sqs/dlq"}
	return h, api, sink, clock
}

// receivedEvent is an event of n messages prefix-0... (handles h-0...)
// received once, but for those whose receive count counts gives.
func receivedEvent(prefix string, n int, counts map[int]int) events.SQSEvent {
	ev := events.SQSEvent{}
	for i := range n {
		c := max(counts[i], 1)
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("%s-%d", prefix, i), ReceiptHandle: fmt.Sprintf("h-%s-%d", prefix, i), Body: `{"n":1}`,
			Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(c), "SentTimestamp": fmt.Sprint(time.Now().UnixMilli())}})
	}
	return ev
}

// TestPacingDeferralKeepsTheLastReceive: at 1 message/s with a second of
// pacing before the deadline, a batch of 10 after one that spent the
// pacer's burst is mostly handed back for its pacing slots; the message on its last receive (5 of maxReceiveCount 5,
// whose hand-back would move it to the dead-letter queue) is stored
// instead, the last of the batch as it is.
func TestPacingDeferralKeepsTheLastReceive(t *testing.T) {
	h, _, sink, clock := lastReceiveHandler(1, `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:q-dlq","maxReceiveCount":5}`)
	var resp events.SQSEventResponse
	for _, batch := range []string{"first", "m"} { // the first spends the pacer's burst
		ctx, cancel := context.WithDeadline(context.Background(), clock.Now().Add(3*time.Second))
		var err error
		resp, err = h.Handle(ctx, receivedEvent(batch, 10, map[int]int{9: 5}))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	back := map[string]bool{}
	for _, f := range resp.BatchItemFailures {
		back[f.ItemIdentifier] = true
	}
	t.Logf("second batch: handed back %d of 10, %d stored in all; the last receive handed back %v", len(back), sink.Len(), back["m-9"])
	if len(back) == 0 || back["m-9"] || !sink.Has("m-9") {
		t.Errorf("handed back %d (want some, for pacing); the message on its last receive handed back %v, stored %v; want stored", len(back), back["m-9"], sink.Has("m-9"))
	}
}

// TestFailingDestinationKeepsTheLastReceive: with the destination down,
// a message whose next receive is its last (4 of maxReceiveCount 5, as a
// number or a string in the RedrivePolicy) and one on its last are sent
// again to the queue (requeued, not batch item failures), the others
// stay away for minutes; with requeues off (MaxRequeues < 0) the two stay
// away as long as SQS allows (12 h). Without a redrive policy there is no
// last receive. At a rate of zero the paused backoff stays (minutes: an
// operator's pause turns the mapping off) and nothing is requeued. The
// queue's attributes are read once.
func TestFailingDestinationKeepsTheLastReceive(t *testing.T) {
	const arn = `"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:q-dlq"`
	for _, c := range []struct {
		name    string
		redrive string
		rate    float64
		last    bool
	}{
		{"maxReceiveCount a string", `{` + arn + `,"maxReceiveCount":"5"}`, 1000, true},
		{"maxReceiveCount a number", `{` + arn + `,"maxReceiveCount":5}`, 1000, true},
		{"no redrive policy", "", 1000, false},
		{"rate zero", `{` + arn + `,"maxReceiveCount":5}`, 0, false},
	} {
		for _, requeue := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, requeue %v", c.name, requeue), func(t *testing.T) {
				h, api, sink, clock := lastReceiveHandler(c.rate, c.redrive)
				if !requeue {
					h.MaxRequeues = -1
				}
				sink.SetDown(true)
				var back map[string]bool
				for range 4 { // the circuit opens on the way
					back = handle(t, h, clock, receivedEvent("m", 10, map[int]int{7: 3, 8: 4, 9: 5}))
					clock.Advance(time.Minute)
				}
				vis := func(h string) time.Duration { return time.Duration(api.visibility[h]) * time.Second }
				sent := map[string]int{}
				for _, e := range api.sentToQueue("http://sqs/q") {
					sent[aws.ToString(e.MessageAttributes[sqsqueue.RequeueAttribute].StringValue)]++
				}
				t.Logf("circuit %v; visibility at receive 3: %v, 4: %v, 5: %v; requeued %v", h.Consumer.Breaker().State(), vis("h-m-7"), vis("h-m-8"), vis("h-m-9"), sent)
				if vis("h-m-7") >= time.Hour || !back["m-7"] || sent["1:m-7"] > 0 {
					t.Errorf("receive 3 of 5: visibility %v, a failure %v, requeued %d; want minutes, a failure, not requeued", vis("h-m-7"), back["m-7"], sent["1:m-7"])
				}
				for _, m := range []string{"m-8", "m-9"} {
					kept, requeued := vis("h-"+m) >= 12*time.Hour && back[m], sent["1:"+m] > 0 && !back[m]
					if kept != (c.last && !requeue) || requeued != (c.last && requeue) {
						t.Errorf("%s: visibility %v, a failure %v, requeued %d times; want kept 12 h %v, requeued %v",
							m, vis("h-"+m), back[m], sent["1:"+m], c.last && !requeue, c.last && requeue)
					}
				}
				if api.reads != 1 {
					t.Errorf("the queue's attributes read %d times; want once", api.reads)
				}
			})
		}
	}
}

// TestRedrivePolicyOfALocalQueue: the local SQS server (ElasticMQ or moto)
// answers GetQueueAttributes with the RedrivePolicy of a queue created
// with maxReceiveCount 3, and MaxReceiveCount reads it.
func TestRedrivePolicyOfALocalQueue(t *testing.T) {
	c, url, _ := localSQS(t, 3)
	out, err := c.GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameMessageRetentionPeriod, sqstypes.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		t.Fatal(err)
	}
	policy := out.Attributes[string(sqstypes.QueueAttributeNameRedrivePolicy)]
	n, err := sqsqueue.MaxReceiveCount(policy)
	t.Logf("RedrivePolicy %s, MessageRetentionPeriod %q", policy, out.Attributes["MessageRetentionPeriod"])
	if err != nil || n != 3 {
		t.Errorf("MaxReceiveCount(%q) = %d, %v; want 3", policy, n, err)
	}
}

// TestMaxReceiveCount reads the count as a number and as a string, and
// refuses what is not a positive count.
func TestMaxReceiveCount(t *testing.T) {
	for policy, want := range map[string]int{
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d","maxReceiveCount":5}`:    5,
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d","maxReceiveCount":"12"}`: 12,
		`{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:1:d"}`:                        0,
		`{"maxReceiveCount":"0"}`: 0,
		`{"maxReceiveCount":2.5}`: 0,
		`not json`:                0,
	} {
		n, err := sqsqueue.MaxReceiveCount(policy)
		if n != want || (err == nil) != (want > 0) {
			t.Errorf("MaxReceiveCount(%s) = %d, %v; want %d", policy, n, err, want)
		}
	}
}
