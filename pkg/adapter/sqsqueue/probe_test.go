package sqsqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// TestInvokeAnswersProbesAndSQSEvents: the function's entry point hands an
// SQS event to Handle as before (the same response, the messages stored),
// answers a probe by the sink's health without storing anything, and
// refuses any other payload with ErrUnknownEvent.
func TestInvokeAnswersProbesAndSQSEvents(t *testing.T) {
	sink := memqueue.NewSink()
	h := newHandler(sink)
	raw, err := os.ReadFile("testdata/sqs-event.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := h.Invoke(context.Background(), raw)
	want, _ := os.ReadFile("testdata/response-poison-redrive.json")
	if b, _ := json.Marshal(got); err != nil || string(b) != strings.TrimSpace(string(want)) || sink.Len() != 2 {
		t.Errorf("Invoke(SQS event) = %s, %v, %d stored; want %s, 2 stored", b, err, sink.Len(), want)
	}
	probe, _ := json.Marshal(protocol.ProbeEvent{Probe: protocol.ProbeRequest{Loop: "orders", Mapping: "esm-1"}})
	for _, down := range []bool{false, true} {
		sink.SetDown(down)
		got, err := h.Invoke(context.Background(), probe)
		ans, ok := got.(protocol.ProbeAnswer)
		if err != nil || !ok || ans.Probe.Up == down || (down && ans.Probe.Error == "") {
			t.Errorf("sink down %v: Invoke(probe) = %#v, %v; want up %v", down, got, err, !down)
		}
	}
	if sink.Len() != 2 {
		t.Errorf("probes stored something: %d rows", sink.Len())
	}
	for _, bad := range []string{`{}`, `{"Records": 3}`, `[1]`, `"x"`, `not json`, `{"detail-type":"Scheduled Event"}`} {
		if got, err := h.Invoke(context.Background(), json.RawMessage(bad)); !errors.Is(err, sqsqueue.ErrUnknownEvent) {
			t.Errorf("Invoke(%s) = %v, %v; want ErrUnknownEvent", bad, got, err)
		}
	}
}

// retentionAPI is fakeAPI with a queue that keeps messages for retention
// and, when redrive is set, has that RedrivePolicy (the JSON string AWS
// answers). It answers the attributes asked for, as AWS does.
type retentionAPI struct {
	fakeAPI
	retention time.Duration
	redrive   string
	fail      bool
	omit      bool // answers without MessageRetentionPeriod (ElasticMQ)
	reads     int  // GetQueueAttributes calls
}

func (r *retentionAPI) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	r.mu.Lock()
	r.reads++
	r.mu.Unlock()
	if r.fail {
		return nil, errors.New("AccessDenied")
	}
	all := map[string]string{"VisibilityTimeout": "30"}
	if !r.omit {
		all["MessageRetentionPeriod"] = fmt.Sprint(int(r.retention.Seconds()))
	}
	if r.redrive != "" {
		all["RedrivePolicy"] = r.redrive
	}
	out := map[string]string{}
	for _, n := range in.AttributeNames {
		if n == sqstypes.QueueAttributeNameAll {
			return &sqs.GetQueueAttributesOutput{Attributes: all}, nil
		}
		if v, ok := all[string(n)]; ok {
			out[string(n)] = v
		}
	}
	return &sqs.GetQueueAttributesOutput{Attributes: out}, nil
}

// TestOpenCircuitHandsBackForMinutes: what the consumer hands back with its
// circuit open stays away by the outage's age: about 30 s in its first
// seconds (a blip recovers fast), minutes once the destination has been
// failing for long (OpenBackoff: 4 min at the first receive), so that a
// long outage spends few receives; never past the message's retention,
// and with the retry backoff when the retention cannot be read.
func TestOpenCircuitHandsBackForMinutes(t *testing.T) {
	for _, c := range []struct {
		name      string
		retention time.Duration
		fail      bool
		omit      bool
		fallback  time.Duration // Handler.QueueRetention
		min, max  time.Duration // 20 minutes into the outage
		early     time.Duration // the most at its start
	}{
		{"14 days", 14 * 24 * time.Hour, false, false, 0, 4 * time.Minute, 5 * time.Minute, 38 * time.Second},
		{"retention bounds it", 3 * time.Minute, false, false, 0, time.Second, 2 * time.Minute, 38 * time.Second},
		{"retention unknown", 0, true, false, 0, time.Second, time.Minute, 30 * time.Second},
		{"retention not reported", 0, false, true, 0, time.Second, time.Minute, 30 * time.Second},
		{"not reported, configured", 0, false, true, 96 * time.Hour, 4 * time.Minute, 5 * time.Minute, 38 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := &retentionAPI{retention: c.retention, fail: c.fail, omit: c.omit}
			s := newMappingSim(0, 0, nil, nil)
			s.sink.SetDown(true)
			h := s.h
			h.API, h.QueueRetention, h.RetryBackoff, h.OpenBackoff = api, c.fallback, consume.Backoff{}, consume.Backoff{}
			opened := false
			for i := range 5 {
				if i == 3 {
					s.clock.Advance(20 * time.Minute)
				}
				ev := events.SQSEvent{}
				for j := range 10 {
					ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m-%d-%d", i, j), ReceiptHandle: fmt.Sprintf("h-%d-%d", i, j),
						Body: `{"n":1}`, Attributes: map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": fmt.Sprint(time.Now().UnixMilli())}})
				}
				if _, err := h.Handle(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
				if h.Consumer.Breaker().State() != consume.CircuitOpen {
					continue
				}
				opened = true
				lo, hi := c.min, c.max
				if i < 3 {
					lo, hi = time.Second, c.early
				}
				for j := range 10 {
					got := time.Duration(api.visibility[fmt.Sprintf("h-%d-%d", i, j)]) * time.Second
					if got < lo || got > hi {
						t.Errorf("batch %d message %d with the circuit open %v: visibility %v; want %v to %v",
							i, j, h.Consumer.Breaker().FailingFor(), got, lo, hi)
					}
				}
			}
			if !opened {
				t.Fatal("the circuit never opened")
			}
			if short := time.Duration(api.visibility["h-0-0"]) * time.Second; short > time.Minute {
				t.Errorf("the first failed batch (circuit closed) got %v; want the retry backoff's seconds", short)
			}
		})
	}
}
