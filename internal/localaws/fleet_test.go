package localaws

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// lockedSQS is an endless queue safe for concurrent pollers: it counts
// what was received and deleted.
type lockedSQS struct {
	mu                sync.Mutex
	next              int
	received, deleted int
}

func (q *lockedSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ms []types.Message
	for range in.MaxNumberOfMessages {
		q.next++
		id := fmt.Sprintf("m-%d", q.next)
		ms = append(ms, types.Message{MessageId: aws.String(id), ReceiptHandle: aws.String(id), Body: aws.String(`{}`)})
	}
	q.received += len(ms)
	return &sqs.ReceiveMessageOutput{Messages: ms}, nil
}

func (q *lockedSQS) DeleteMessageBatch(_ context.Context, in *sqs.DeleteMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := &sqs.DeleteMessageBatchOutput{}
	for _, e := range in.Entries {
		out.Successful = append(out.Successful, types.DeleteMessageBatchResultEntry{Id: e.Id})
	}
	q.deleted += len(in.Entries)
	return out, nil
}

// TestFleetFollowsMaximumConcurrency: at most the mapping's concurrency
// of invocations run at once, the fleet follows a change of it, and a
// poller stopped by a scale-down settles the batch it holds.
func TestFleetFollowsMaximumConcurrency(t *testing.T) {
	var inFlight, peak atomic.Int64
	var limit atomic.Int64
	limit.Store(3)
	rie := &fakeRIE{respond: func([]byte) (int, string) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		return 200, `{"batchItemFailures":[]}`
	}}
	srv := httptest.NewServer(rie)
	defer srv.Close()
	q := &lockedSQS{}
	f := &Fleet{MemoryMB: 256, Every: 10 * time.Millisecond,
		Concurrency: func(context.Context) (int, error) { return int(limit.Load()), nil }}
	for range 5 {
		f.Pollers = append(f.Pollers, &Poller{API: q, Invoker: &RIE{URL: srv.URL}, QueueURL: "http://q/000000000000/q", BatchSize: 10})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Billing)
	go func() { done <- f.Run(ctx) }()
	waitFor(t, func() bool { return f.Billing().Invocations >= 20 })
	if got := peak.Load(); got != 3 {
		t.Errorf("peak concurrency %d at MaximumConcurrency 3; want 3", got)
	}
	limit.Store(1)
	waitFor(t, func() bool { return f.Running() == 1 && inFlight.Load() <= 1 })
	peak.Store(0)
	before := f.Billing().Invocations
	waitFor(t, func() bool { return f.Billing().Invocations >= before+10 })
	if got := peak.Load(); got != 1 {
		t.Errorf("peak concurrency %d after MaximumConcurrency 1; want 1", got)
	}
	cancel()
	b := <-done
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.received != q.deleted || b.Messages != int64(q.received) {
		t.Errorf("received %d, deleted %d, billed messages %d; want every received batch invoked and deleted", q.received, q.deleted, b.Messages)
	}
	if b.Billed < time.Duration(b.Invocations)*20*time.Millisecond || b.GBSeconds() != b.Billed.Seconds()/4 {
		t.Errorf("billing %+v (%v GB-s); want at least 20 ms per invocation and GB-s = s x 256/1024", b, b.GBSeconds())
	}
}

func TestBilledDuration(t *testing.T) {
	for _, c := range []struct{ in, want time.Duration }{
		{0, 0}, {time.Microsecond, time.Millisecond}, {time.Millisecond, time.Millisecond},
		{1500 * time.Microsecond, 2 * time.Millisecond}, {time.Second + 1, time.Second + time.Millisecond},
	} {
		if got := BilledDuration(c.in); got != c.want {
			t.Errorf("BilledDuration(%v) = %v; want %v", c.in, got, c.want)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for range 1000 {
		if cond() {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("condition not met in 5 s")
}

// TestFleetDisabledMappingReceivesNothing: a disabled mapping receives
// nothing (no receive, no invocation); enabled again, it receives, and a
// failed read of the state keeps the last one.
func TestFleetDisabledMappingReceivesNothing(t *testing.T) {
	rie := &fakeRIE{respond: func([]byte) (int, string) { return 200, `{"batchItemFailures":[]}` }}
	srv := httptest.NewServer(rie)
	defer srv.Close()
	q := &lockedSQS{}
	var enabled atomic.Bool
	var reads atomic.Int64
	f := &Fleet{Every: 10 * time.Millisecond, Enabled: func(context.Context) (bool, error) {
		if reads.Add(1)%2 == 0 {
			return false, fmt.Errorf("GetEventSourceMapping: throttled")
		}
		return enabled.Load(), nil
	}}
	for range 2 {
		f.Pollers = append(f.Pollers, &Poller{API: q, Invoker: &RIE{URL: srv.URL}, QueueURL: "http://q/000000000000/q", BatchSize: 10})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan Billing)
	go func() { done <- f.Run(ctx) }()
	waitFor(t, func() bool { return reads.Load() >= 10 })
	q.mu.Lock()
	got := q.received
	q.mu.Unlock()
	if got != 0 || f.Running() != 0 {
		t.Fatalf("disabled mapping: received %d messages, %d pollers running; want 0 and 0", got, f.Running())
	}
	enabled.Store(true)
	waitFor(t, func() bool { return f.Billing().Invocations >= 5 })
	cancel()
	<-done
}

// fakeMapping answers GetEventSourceMapping with state or err.
type fakeMapping struct {
	state string
	err   error
}

func (f fakeMapping) GetEventSourceMapping(context.Context, *lambda.GetEventSourceMappingInput, ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error) {
	return &lambda.GetEventSourceMappingOutput{State: aws.String(f.state)}, f.err
}

func TestMappingEnabled(t *testing.T) {
	for _, tt := range []struct {
		state   string
		want    bool
		wantErr bool
	}{
		{"Enabled", true, false}, {"Updating", true, false}, {"Disabled", false, false},
		{"Disabling", false, false}, {"Creating", false, false}, {"Enabled", false, true},
	} {
		api := fakeMapping{state: tt.state}
		if tt.wantErr {
			api.err = fmt.Errorf("ResourceNotFoundException")
		}
		got, err := MappingEnabled(api, "u-1")(context.Background())
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("MappingEnabled(State %q, err %v) = %v, %v; want %v, error %v", tt.state, api.err, got, err, tt.want, tt.wantErr)
		}
	}
}
