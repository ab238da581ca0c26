package kafkasource_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestDeadLetterRetriableResolves: while the dead-letter topic answers
// NOT_ENOUGH_REPLICAS (retriable: franz-go retries it by itself, without
// limit), a DeadLetter does not block the consumer silently for the whole
// context it was given (the consumer's StoreTimeout, 30 s, with all its
// partitions): it gives up after Config.DeadLetterTimeout, counts and
// logs the refusal, and the source produces the dead letter again itself.
// Once the topic takes writes again the poison is dead-lettered once and
// the group commits past it; no healthy record is dead-lettered.
func TestDeadLetterRetriableResolves(t *testing.T) {
	const n = 30
	c := newFake(t, "slow", 1)
	brokers := c.ListenAddrs()
	refusing := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "slow.dlt", Err: kerr.NotEnoughReplicas, Count: -1})
	healthy := bigPoison(t, brokers, "slow", 100, n)
	var logs bytes.Buffer // written by drive's goroutine only, read once it ended
	src, err := kafkasource.New(kafkasource.Config{Brokers: brokers, Topics: []string{"slow"}, Group: "g", Opts: fastGroup,
		CommitInterval: -1, DeadLetterTimeout: time.Second, RetryBackoff: consume.Backoff{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	received, stop := drive(t, src)
	defer stop()
	refused := func() bool { return src.Stats().DeadLetterRefused.Load() > 0 }
	start := time.Now()
	for deadline := start.Add(10 * time.Second); !refused() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("first refusal counted %v after the source started", time.Since(start).Round(10*time.Millisecond))
	if !refused() {
		t.Errorf("10 s of NOT_ENOUGH_REPLICAS from the dead-letter topic (%d produces refused) and no refusal counted: DeadLetter blocks the consumer silently", refusing.Hits())
	}
	if got, ok := committed(t, brokers, "g", "slow")[0]; ok && got > 0 {
		t.Errorf("committed offset %d with the poison not dead-lettered; want none", got)
	}
	refusing.Remove()
	waitFor(t, 20*time.Second, "the group committed past the poison once the topic took writes", func() bool { return committed(t, brokers, "g", "slow")[0] == n+1 })
	stop()
	if h, _ := deadHeaders(t, brokers, "slow.dlt"); h[kafkasource.HeaderID] != "big" {
		t.Errorf("dead letter id %q; want the poison's", h[kafkasource.HeaderID])
	}
	if m := missing(healthy, func(id string) bool { return received[id] > 0 }); len(m) > 0 {
		t.Errorf("%d healthy records never received, e.g. %v", len(m), m[0])
	}
	if received["big"] != 1 {
		t.Errorf("the poison was handed out %d times; want once", received["big"])
	}
	var refusedLines []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "dead-letter topic refused a record") {
			refusedLines = append(refusedLines, l)
		}
	}
	if len(refusedLines) != 1 || !strings.Contains(refusedLines[0], "id=big") || !strings.Contains(refusedLines[0], "refusal=\"retriable") {
		t.Errorf("error lines for the refused record: %q; want one, naming it and the refusal as retriable", refusedLines)
	}
}

// TestLambdaDeadLetterRetriableCounted: on the Kafka Lambda, a dead-letter
// topic answering NOT_ENOUGH_REPLICAS is not waited on silently to the
// end of the invocation: each send gives up after TopicDeadLetters.Timeout,
// the handler counts the refusal (EMF DeadLetterRefused) and sends again
// within the invocation, which succeeds once the topic takes writes.
func TestLambdaDeadLetterRetriableCounted(t *testing.T) {
	c := newFake(t, "slowl", 1, kfake.SeedTopics(1, "slowl.dlt"))
	refusing := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "slowl.dlt", Err: kerr.NotEnoughReplicas, Count: -1})
	sink := memqueue.NewSink()
	cl := client(t, c.ListenAddrs())
	h := lambdaHandler(1000, sink, kafkasource.TopicDeadLetters{Client: cl, Timeout: 500 * time.Millisecond})
	h.HoldPoll, h.PacingMargin = 100*time.Millisecond, time.Second
	var emf bytes.Buffer
	h.Metrics = &emf
	healed := make(chan struct{})
	defer func() { <-healed }()
	go func() {
		defer close(healed)
		time.Sleep(2 * time.Second)
		refusing.Remove()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Handle(ctx, bigEvent("slowl", 100)); err != nil {
		t.Fatalf("Handle = %v; want nil (dead-lettered once the topic took writes)", err)
	}
	if got := refusedInEMF(t, emf.Bytes()); got == 0 {
		t.Errorf("EMF DeadLetterRefused = 0 after 2 s of NOT_ENOUGH_REPLICAS (%d produces refused); want the refusals counted", refusing.Hits())
	}
	if got := len(readAll(t, c.ListenAddrs(), "slowl.dlt")); got != 1 {
		t.Errorf("slowl.dlt holds %d records; want the poison once", got)
	}
}
