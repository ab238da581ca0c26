package localaws

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// handlerInvoker runs a Kafka consumer Lambda's handler in process, each
// invocation under its own timeout, as Lambda runs the function.
type handlerInvoker struct {
	h       *kafkasource.LambdaHandler
	timeout time.Duration
}

func (i handlerInvoker) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	var ev events.KafkaEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, i.timeout)
	defer cancel()
	if err := i.h.Handle(ctx, ev); err != nil {
		return nil, &FunctionError{Message: err.Error(), Type: "wrapError"}
	}
	return []byte("null"), nil
}

// TestKafkaLambdaHoldsThroughPauseStrictPoller: behind a strict Kafka
// mapping with an on-failure destination (10 retries, then the batch is
// skipped), a pause of the allowed rate shorter than the retries' time
// must lose nothing: the handler holds within its deadline instead of
// failing at once, so the retries outlast the pause and every record is
// stored before the batch is committed.
func TestKafkaLambdaHoldsThroughPauseStrictPoller(t *testing.T) {
	p, _ := kafkaFixture(t, 6, &fakeRIE{})
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "orders", PerSecond: 0})
	sink := memqueue.NewSink()
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", Period: 100 * time.Millisecond, SafeRate: 1}, rates, nil, consume.WallClock{}, nil, nil)
	h := &kafkasource.LambdaHandler{Consumer: consume.New(consume.Config{}, rc, sink, consume.WallClock{}, nil, nil),
		DeadLetters: &noDeadLetters{}, Loop: "orders", PacingMargin: 50 * time.Millisecond, HoldPoll: 50 * time.Millisecond}
	p.Invoker = handlerInvoker{h: h, timeout: 300 * time.Millisecond}
	dest := &failureRecorder{}
	p.OnFailure = dest
	// The pause lasts a second: longer than 11 invocations that fail at
	// once (10 ms apart), shorter than 11 that hold until their deadline.
	inner := p.Invoker
	var resume sync.Once
	p.Invoker = invokerFunc(func(ctx context.Context, b []byte) ([]byte, error) {
		resume.Do(func() {
			time.AfterFunc(time.Second, func() { rates.Put(protocol.Rate{Loop: "orders", PerSecond: 1000}) })
		})
		return inner.Invoke(ctx, b)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stored := 0
	for stored < 6 && ctx.Err() == nil {
		res, err := p.PollOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Discarded {
			t.Fatalf("batch %v discarded after %d invocations: records lost (%v)", res.Origins, res.Invocations, res.LastErr)
		}
		stored += res.Records
	}
	if sink.Len() != 6 || len(dest.got) != 0 {
		t.Errorf("stored %d of 6, %d batches sent to the on-failure destination; want 6 and 0", sink.Len(), len(dest.got))
	}
}

type invokerFunc func(ctx context.Context, payload []byte) ([]byte, error)

func (f invokerFunc) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	return f(ctx, payload)
}

// noDeadLetters refuses every dead letter: the test's records are healthy.
type noDeadLetters struct{}

func (noDeadLetters) SendDeadLetters(context.Context, []consume.Poison) ([]consume.Message, error) {
	return nil, fmt.Errorf("no dead letter expected")
}

// TestKafkaMappingDisabledPollsNothing: a pause longer than the handler's
// hold (11 invocations that each hold to their 200 ms deadline) behind a
// strict mapping with an on-failure destination loses nothing when the
// controller turns the mapping off for it (a loop's pause, esm_kind
// kafka): the disabled mapping polls and invokes nothing, and once it is
// on again (and the rate back) every record is stored and committed.
func TestKafkaMappingDisabledPollsNothing(t *testing.T) {
	p, _ := kafkaFixture(t, 6, &fakeRIE{})
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "orders", PerSecond: 0})
	sink := memqueue.NewSink()
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", Period: 50 * time.Millisecond, SafeRate: 1}, rates, nil, consume.WallClock{}, nil, nil)
	h := &kafkasource.LambdaHandler{Consumer: consume.New(consume.Config{}, rc, sink, consume.WallClock{}, nil, nil),
		DeadLetters: &noDeadLetters{}, Loop: "orders", PacingMargin: 50 * time.Millisecond, HoldPoll: 50 * time.Millisecond}
	dest := &failureRecorder{}
	p.OnFailure = dest
	var mu sync.Mutex
	enabled, pausedInvocations := false, 0
	inner := handlerInvoker{h: h, timeout: 200 * time.Millisecond}
	p.Invoker = invokerFunc(func(ctx context.Context, b []byte) ([]byte, error) {
		mu.Lock()
		if !enabled {
			pausedInvocations++
		}
		mu.Unlock()
		return inner.Invoke(ctx, b)
	})
	p.Enabled = func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return enabled, nil
	}
	p.Every = 20 * time.Millisecond
	var results []KafkaBatchResult
	p.OnBatch = func(r KafkaBatchResult) { results = append(results, r) }
	// The resume, after longer than 11 held invocations take.
	time.AfterFunc(3*time.Second, func() {
		rates.Put(protocol.Rate{Loop: "orders", PerSecond: 1000})
		mu.Lock()
		enabled = true
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go p.Run(ctx)
	for sink.Len() < 6 && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if pausedInvocations != 0 || sink.Len() != 6 || len(dest.got) != 0 {
		t.Errorf("%d invocations while the mapping was off, %d of 6 stored, %d batches to the on-failure destination; want 0, 6, 0",
			pausedInvocations, sink.Len(), len(dest.got))
	}
}
