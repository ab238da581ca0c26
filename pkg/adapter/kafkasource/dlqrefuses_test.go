package kafkasource_test

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestDeadLetterRefusedHoldsBounded: while the dead-letter topic refuses
// (authorization lost), a poison record holds its partition's commit back
// (nothing is committed before it is dead-lettered), and the records
// delivered after it, stored but not committable, stop growing at
// MaxHeld: the partition is no longer fetched until the commit point
// moves. The source tries the dead-letter send again itself, with its
// reason: the poison is not handed out again (through the destination,
// whose refusals would fill the consumer's mass-poison window while the
// healthy records wait behind the bound). Every refusal is counted for an
// alarm. Once the topic takes writes again, the poison is dead-lettered,
// the rest is fetched and everything is committed.
func TestDeadLetterRefusedHoldsBounded(t *testing.T) {
	const n, maxHeld, batch = 300, 40, 10
	c := newFake(t, "held", 1)
	brokers := c.ListenAddrs()
	produce(t, brokers, "held", "h", 0, n, func(i int) bool { return i == 0 })
	src, err := kafkasource.New(kafkasource.Config{Brokers: brokers, Topics: []string{"held"}, Group: "g", Opts: fastGroup,
		CommitInterval: -1, MaxHeld: maxHeld, RetryBackoff: consume.Backoff{Base: 50 * time.Millisecond, Max: 50 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	refusing := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "held.dlt", Err: kerr.TopicAuthorizationFailed, Count: -1})
	received, heldMax := map[string]int{}, 0
	settle := func(ctx context.Context) {
		msgs, err := src.Receive(ctx, batch)
		if err != nil {
			t.Logf("Receive: %v", err)
		}
		var healthy []consume.Message
		for _, m := range msgs {
			received[m.ID]++
			if m.ID == "h-0" {
				_ = src.DeadLetter(ctx, []consume.Poison{{Message: m, Reason: "bad body"}})
				continue
			}
			healthy = append(healthy, m)
		}
		if err := src.Ack(ctx, healthy); err != nil {
			t.Errorf("Ack: %v", err)
		}
		heldMax = max(heldMax, src.Held())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	for ctx.Err() == nil {
		settle(ctx)
	}
	cancel()
	if refusing.Hits() == 0 {
		t.Fatal("the dead-letter topic's refusal was never hit")
	}
	if heldMax > maxHeld+batch {
		t.Errorf("while the dead-letter topic refused, the source held %d records; want at most MaxHeld+batch = %d", heldMax, maxHeld+batch)
	}
	if len(received) >= n {
		t.Errorf("while the dead-letter topic refused, all %d records were fetched; want fetching stopped at the bound", len(received))
	}
	if got, ok := committed(t, brokers, "g", "held")[0]; ok {
		t.Errorf("committed offset %d with the poison not dead-lettered; want none", got)
	}
	if got := src.Stats().DeadLetterRefused.Load(); got == 0 {
		t.Errorf("Stats().DeadLetterRefused = 0 after %d refused produces; want them counted", refusing.Hits())
	}
	refusing.Remove()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil && (len(received) < n || src.Held() > 0) {
		settle(ctx)
	}
	if len(received) < n || src.Held() != 0 {
		t.Fatalf("after the topic took writes again: %d of %d records received, %d held; want all, none held", len(received), n, src.Held())
	}
	if got := committed(t, brokers, "g", "held")[0]; got != n {
		t.Errorf("committed offset = %d; want %d", got, n)
	}
	if got := len(readAll(t, brokers, "held.dlt")); got != 1 {
		t.Errorf("held.dlt holds %d records; want the poison once", got)
	}
	if received["h-0"] != 1 {
		t.Errorf("the poison was handed out %d times; want once (the source retries the dead-letter send itself)", received["h-0"])
	}
}
