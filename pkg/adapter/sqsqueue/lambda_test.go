package sqsqueue_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/internal/testfile"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

func loadEvent(t *testing.T) events.SQSEvent {
	t.Helper()
	return testfile.JSON[events.SQSEvent](t, "testdata/sqs-event.json")
}

func newHandler(sink consume.Sink) *sqsqueue.Handler {
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "orders", PerSecond: 1000})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", SafeRate: 1}, rates, nil, consume.WallClock{}, nil, nil)
	return &sqsqueue.Handler{Consumer: consume.New(consume.Config{}, rc, sink, consume.WallClock{}, nil, nil), Loop: "orders"}
}

func TestHandlerRoundTrip(t *testing.T) {
	tests := []struct {
		name   string
		down   bool
		golden string
		stored int
	}{
		{"poison returned for redrive", false, "testdata/response-poison-redrive.json", 2},
		{"sink down fails everything", true, "testdata/response-sink-down.json", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := memqueue.NewSink()
			sink.SetDown(tt.down)
			h := newHandler(sink)
			var emf bytes.Buffer
			h.Metrics = &emf
			resp, err := h.Handle(context.Background(), loadEvent(t))
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			got, _ := json.Marshal(resp)
			want, err := os.ReadFile(tt.golden)
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(string(want)) != string(got) {
				t.Errorf("response\n got %s\nwant %s", got, want)
			}
			if sink.Len() != tt.stored {
				t.Errorf("stored %d; want %d", sink.Len(), tt.stored)
			}
			var line map[string]any
			if err := json.Unmarshal(emf.Bytes(), &line); err != nil || line["_aws"] == nil || line["Stored"] != float64(tt.stored) {
				t.Errorf("EMF line %s (err %v); want _aws and Stored=%d", emf.String(), err, tt.stored)
			}
		})
	}
}

func TestFromEvent(t *testing.T) {
	m := sqsqueue.FromEvent(loadEvent(t).Records[0])
	if m.ID != "059f36b4-87a3-44ab-83d2-661975830a7d" || m.ReceiveCount != 1 || m.Attributes["tenant"] != "acme" || m.SentAt.UnixMilli() != 1545082649183 {
		t.Errorf("FromEvent = %+v", m)
	}
}

// TestHandlerDeadLettersPoison sends the poison message to a real DLQ (ElasticMQ or moto)
// with its reason and reports it as done.
func TestHandlerDeadLettersPoison(t *testing.T) {
	c, _, dlqURL := localSQS(t, 0)
	h := newHandler(memqueue.NewSink())
	h.API, h.DeadLetterURL = c, dlqURL
	resp, err := h.Handle(context.Background(), loadEvent(t))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(resp)
	want, _ := os.ReadFile("testdata/response-poison-dead-lettered.json")
	if strings.TrimSpace(string(want)) != string(got) {
		t.Errorf("response %s; want %s", got, want)
	}
	out, err := c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: &dlqURL, MessageAttributeNames: []string{"All"}, WaitTimeSeconds: 1})
	if err != nil || len(out.Messages) != 1 {
		t.Fatalf("DLQ receive = %d messages, %v; want 1", len(out.Messages), err)
	}
	m := out.Messages[0]
	reason := aws.ToString(m.MessageAttributes[sqsqueue.ReasonAttribute].StringValue)
	if aws.ToString(m.Body) != "this is not JSON" || !strings.Contains(reason, "malformed payload") {
		t.Errorf("DLQ got %q with reason %q", aws.ToString(m.Body), reason)
	}
}
