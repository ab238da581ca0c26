package localaws

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sluice-dev/sluice/internal/testclock"
)

// fakeRIE is an emulator endpoint: it records each payload and answers
// with respond(payload).
type fakeRIE struct {
	mu       sync.Mutex
	payloads [][]byte
	respond  func(payload []byte) (int, string)
}

func (f *fakeRIE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != InvokePath {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.payloads = append(f.payloads, b)
	f.mu.Unlock()
	code, body := f.respond(b)
	w.WriteHeader(code)
	io.WriteString(w, body)
}

// fakeSQS is a queue in memory that records receives and deletes.
type fakeSQS struct {
	msgs     []types.Message
	deleted  []string // receipt handles
	receives int
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.receives++
	n := min(int(in.MaxNumberOfMessages), len(f.msgs))
	out := &sqs.ReceiveMessageOutput{Messages: f.msgs[:n]}
	f.msgs = f.msgs[n:]
	return out, nil
}

func (f *fakeSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		f.deleted = append(f.deleted, aws.ToString(e.ReceiptHandle))
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func messages(bodies ...string) []types.Message {
	var ms []types.Message
	for i, b := range bodies {
		ms = append(ms, types.Message{
			MessageId:     aws.String(fmt.Sprintf("id-%d", i)),
			ReceiptHandle: aws.String(fmt.Sprintf("rh-%d", i)),
			Body:          aws.String(b),
			Attributes:    map[string]string{"ApproximateReceiveCount": "1", "SentTimestamp": "1545082649183"},
			MessageAttributes: map[string]types.MessageAttributeValue{
				"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")},
			},
		})
	}
	return ms
}

// failBodies answers like a handler that fails the records whose body
// starts with "fail".
func failBodies(payload []byte) (int, string) {
	var ev events.SQSEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return 200, `{"errorMessage":"bad event","errorType":"Error"}`
	}
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	for _, r := range ev.Records {
		if strings.HasPrefix(r.Body, "fail") {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		}
	}
	b, _ := json.Marshal(resp)
	return 200, string(b)
}

func TestPoller(t *testing.T) {
	tests := []struct {
		name        string
		bodies      []string
		respond     func([]byte) (int, string)
		wantDeleted []string
		wantFailed  int
		wantErr     bool // the whole batch failed
	}{
		{"all stored", []string{`{"a":1}`, `{"a":2}`}, failBodies, []string{"rh-0", "rh-1"}, 0, false},
		{"partial batch response", []string{`{"a":1}`, "fail", `{"a":3}`, "fail too"}, failBodies, []string{"rh-0", "rh-2"}, 2, false},
		{"empty response", []string{`{"a":1}`}, func([]byte) (int, string) { return 200, "null" }, []string{"rh-0"}, 0, false},
		{"function error", []string{`{"a":1}`, `{"a":2}`}, func([]byte) (int, string) {
			return 200, `{"errorMessage":"sink down","errorType":"errorString"}`
		}, nil, 2, true},
		{"unknown item fails the batch", []string{`{"a":1}`}, func([]byte) (int, string) {
			return 200, `{"batchItemFailures":[{"itemIdentifier":"nope"}]}`
		}, nil, 1, true},
		{"emulator down", []string{`{"a":1}`}, func([]byte) (int, string) { return 502, "bad gateway" }, nil, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rie := &fakeRIE{respond: tt.respond}
			srv := httptest.NewServer(rie)
			defer srv.Close()
			q := &fakeSQS{msgs: messages(tt.bodies...)}
			var seen []BatchResult
			p := &Poller{API: q, Invoker: &RIE{URL: srv.URL}, QueueURL: "http://127.0.0.1:4566/000000000000/orders",
				OnBatch: func(r BatchResult) { seen = append(seen, r) }}
			res, err := p.PollOnce(context.Background())
			if err != nil {
				t.Fatalf("PollOnce: %v", err)
			}
			if !slices.Equal(q.deleted, tt.wantDeleted) {
				t.Errorf("deleted %v; want %v", q.deleted, tt.wantDeleted)
			}
			if res.Failed != tt.wantFailed || res.Received != len(tt.bodies) || (res.InvokeErr != nil) != tt.wantErr {
				t.Errorf("result %+v; want %d received, %d failed, whole batch failed %v", res, len(tt.bodies), tt.wantFailed, tt.wantErr)
			}
			if len(seen) != 1 {
				t.Errorf("OnBatch saw %d batches; want 1", len(seen))
			}
			// The function got a real SQS event.
			var ev events.SQSEvent
			if err := json.Unmarshal(rie.payloads[0], &ev); err != nil {
				t.Fatalf("payload is not an SQS event: %v", err)
			}
			r := ev.Records[0]
			if r.EventSource != "aws:sqs" || r.EventSourceARN != "arn:aws:sqs:us-east-1:000000000000:orders" ||
				r.AWSRegion != "us-east-1" || r.Attributes["ApproximateReceiveCount"] != "1" || r.Md5OfBody == "" ||
				aws.ToString(r.MessageAttributes["tenant"].StringValue) != "acme" || r.Body != tt.bodies[0] {
				t.Errorf("record = %+v; want an SQS record of the queue with its attributes", r)
			}
		})
	}
}

func TestPollerEmptyQueue(t *testing.T) {
	rie := &fakeRIE{respond: failBodies}
	srv := httptest.NewServer(rie)
	defer srv.Close()
	q := &fakeSQS{}
	p := &Poller{API: q, Invoker: &RIE{URL: srv.URL}, QueueURL: "http://h/000000000000/q"}
	res, err := p.PollOnce(context.Background())
	if err != nil || res.Received != 0 || len(rie.payloads) != 0 {
		t.Errorf("PollOnce on an empty queue = %+v, %v, %d invocations; want nothing received, no invocation", res, err, len(rie.payloads))
	}
}

func TestFailedItems(t *testing.T) {
	ids := []string{"a", "b"}
	tests := []struct {
		body    string
		want    []string
		wantErr bool
	}{
		{``, nil, false},
		{`null`, nil, false},
		{`{"batchItemFailures":[]}`, nil, false},
		{`{"batchItemFailures":[{"itemIdentifier":"b"}]}`, []string{"b"}, false},
		{`{"batchItemFailures":[{"itemIdentifier":""}]}`, nil, true},
		{`{"batchItemFailures":[{"itemIdentifier":"c"}]}`, nil, true},
	}
	for _, tt := range tests {
		got, err := FailedItems([]byte(tt.body), ids)
		var keys []string
		for k := range got {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if (err != nil) != tt.wantErr || !slices.Equal(keys, tt.want) {
			t.Errorf("FailedItems(%q) = %v, %v; want %v, error %v", tt.body, keys, err, tt.want, tt.wantErr)
		}
	}
}

func TestScheduler(t *testing.T) {
	rie := &fakeRIE{respond: func([]byte) (int, string) { return 200, `{"loops":1}` }}
	srv := httptest.NewServer(rie)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	clock := &testclock.Stopper{Clock: testclock.New(time.Date(2026, 11, 29, 23, 0, 3, 0, time.UTC)), Until: time.Date(2026, 11, 29, 23, 0, 35, 0, time.UTC), Cancel: cancel}
	var invs []Invocation
	n := 0
	s := &Scheduler{Invoker: &RIE{URL: srv.URL}, Period: 10 * time.Second, Clock: clock,
		NewID:        func() string { n++; return fmt.Sprintf("ev-%d", n) },
		OnInvocation: func(i Invocation) { invs = append(invs, i) }}
	if err := s.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(rie.payloads) != 3 || len(invs) != 3 {
		t.Fatalf("%d invocations; want 3 (at :10, :20, :30)", len(rie.payloads))
	}
	for i, p := range rie.payloads {
		var ev events.EventBridgeEvent
		if err := json.Unmarshal(p, &ev); err != nil {
			t.Fatalf("payload %d: %v", i, err)
		}
		wantAt := time.Date(2026, 11, 29, 23, 0, 10*(i+1), 0, time.UTC)
		if ev.DetailType != "Scheduled Event" || ev.Source != "aws.events" || !ev.Time.Equal(wantAt) ||
			ev.ID != fmt.Sprintf("ev-%d", i+1) || ev.AccountID != "000000000000" ||
			!slices.Equal(ev.Resources, []string{"arn:aws:events:us-east-1:000000000000:rule/sluice-controller-schedule"}) ||
			string(ev.Detail) != "{}" {
			t.Errorf("event %d = %+v; want a scheduled event at %v", i, ev, wantAt)
		}
		if invs[i].Err != nil || string(invs[i].Response) != `{"loops":1}` {
			t.Errorf("invocation %d = %+v; want the function's response", i, invs[i])
		}
	}
}

func TestRIEInvokeErrors(t *testing.T) {
	rie := &fakeRIE{respond: func([]byte) (int, string) {
		return 200, `{"errorMessage":"controller tick: 1 of 1 loops failed","errorType":"wrapError"}`
	}}
	srv := httptest.NewServer(rie)
	defer srv.Close()
	_, err := (&RIE{URL: srv.URL}).Invoke(context.Background(), []byte(`{}`))
	var fe *FunctionError
	if !errors.As(err, &fe) || fe.Type != "wrapError" {
		t.Errorf("Invoke = %v; want a *FunctionError of type wrapError", err)
	}
}

// fakeAttributes answers GetQueueAttributes with attrs or err, recording
// the queue URL and attribute names asked for.
type fakeAttributes struct {
	attrs map[string]string
	err   error
	url   string
	names []types.QueueAttributeName
}

func (f *fakeAttributes) GetQueueAttributes(_ context.Context, in *sqs.GetQueueAttributesInput, _ ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error) {
	f.url, f.names = aws.ToString(in.QueueUrl), in.AttributeNames
	return &sqs.GetQueueAttributesOutput{Attributes: f.attrs}, f.err
}

func TestLookupQueueARN(t *testing.T) {
	const url = "http://127.0.0.1:9324/000000000000/orders"
	tests := []struct {
		name    string
		api     *fakeAttributes
		want    string
		wantErr string
	}{
		{"the server's ARN", &fakeAttributes{attrs: map[string]string{"QueueArn": "arn:aws:sqs:elasticmq:000000000000:orders"}},
			"arn:aws:sqs:elasticmq:000000000000:orders", ""},
		{"no QueueArn", &fakeAttributes{attrs: map[string]string{}}, "", "no QueueArn"},
		{"error", &fakeAttributes{err: errors.New("AWS.SimpleQueueService.NonExistentQueue")}, "", "NonExistentQueue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LookupQueueARN(context.Background(), tt.api, url)
			if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("LookupQueueARN = %q, %v; want %q, error containing %q", got, err, tt.want, tt.wantErr)
			}
			if tt.api.url != url || !slices.Equal(tt.api.names, []types.QueueAttributeName{types.QueueAttributeNameQueueArn}) {
				t.Errorf("asked for %v of %q; want QueueArn of %q", tt.api.names, tt.api.url, url)
			}
		})
	}
}

func TestQueueARN(t *testing.T) {
	if got := QueueARN("http://127.0.0.1:4566/000000000000/sluice-e2e", "us-east-1"); got != "arn:aws:sqs:us-east-1:000000000000:sluice-e2e" {
		t.Errorf("QueueARN = %q", got)
	}
}

// ReceiveAll passes on every message, batch after batch, and stops after
// the given number of empty receives.
func TestReceiveAll(t *testing.T) {
	q := &fakeSQS{msgs: messages("a", "b", "c", "d", "e")}
	var got []string
	err := ReceiveAll(context.Background(), q, &sqs.ReceiveMessageInput{MaxNumberOfMessages: 2}, 3, func(m types.Message) {
		got = append(got, aws.ToString(m.Body))
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, "") != "abcde" || q.receives != 3+3 {
		t.Errorf("ReceiveAll passed on %q in %d receives; want abcde in 3 receives and 3 empty ones", got, q.receives)
	}
}
