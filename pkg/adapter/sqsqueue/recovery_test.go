package sqsqueue_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/testclock"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// lowest and highest are Backoff jitters that draw the shortest and the
// longest wait: the worst case for the receives a message spends, and for
// how long it stays away after the destination is back.
func lowest(time.Duration) time.Duration    { return 0 }
func highest(c time.Duration) time.Duration { return c }

// simMessage is a message of the simulated queue.
type simMessage struct {
	id        string
	receives  int
	firstAt   time.Time // the first receive (zero: not yet)
	visibleAt time.Time
	storedAt  time.Time // zero: not yet
	// copies is how often the handler sent the message again to the queue
	// (requeued); the copy in the queue then has its own message id, a
	// fresh receive count, and the attributes it was sent with.
	copies int
	attrs  map[string]events.SQSMessageAttribute
	sentAt time.Time
	// receivesAll counts the receives of all its copies; peak is the most
	// receives one copy had.
	receivesAll, peak int
}

// recordID is the message id of m's copy in the queue.
func (m *simMessage) recordID() string {
	if m.copies == 0 {
		return m.id
	}
	return fmt.Sprintf("%s~%d", m.id, m.copies)
}

// mappingSim is an SQS queue with a Lambda event source mapping that keeps
// polling (no controller holds it off: the worst case), in virtual time: an
// invocation takes up to 10 visible messages, each receive counts, and the
// handler's visibility of what it hands back is applied. The destination
// is down from the start for outage.
type mappingSim struct {
	clock  *testclock.Clock
	start  time.Time
	h      *sqsqueue.Handler
	api    *retentionAPI
	sink   *memqueue.Sink
	outage time.Duration
	msgs   []*simMessage
	// maxReceiveCount is the queue's redrive policy: a receive past it
	// moves the message to the dead-letter queue (counted, not delivered).
	maxReceiveCount int
	deadLettered    int
	// requeues counts the copies the handler sent to the queue; firstDead
	// is when the first message was dead-lettered.
	requeues  int
	firstDead time.Time
	// brownout, when set, is the destination's failing share from the
	// start (each message failed transiently with it: throttles, 503s).
	brownout *brownoutSink
	// fresh, when set, makes a new Handler (a new consumer and breaker)
	// for every invocation: the Lambda instances of a mapping that scales
	// and recycles them, each of which sees the outage anew.
	fresh func() *sqsqueue.Handler
}

// newMappingSim returns a simulation of n messages sent at the start, with
// the Handler's backoffs drawn by jitter and the breaker's by breaker.
func newMappingSim(n int, outage time.Duration, jitter, breaker func(time.Duration) time.Duration) *mappingSim {
	clock := testclock.New(time.Now())
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "orders", PerSecond: 1000})
	sink := memqueue.NewSink()
	api := &retentionAPI{retention: 14 * 24 * time.Hour, redrive: `{"deadLetterTargetArn":"arn:aws:sqs:us-east-1:000000000000:q-dlq","maxReceiveCount":"5"}`}
	s := &mappingSim{clock: clock, api: api, sink: sink, outage: outage, maxReceiveCount: 5}
	s.brownout = &brownoutSink{Sink: sink, clock: clock, start: clock.Now(), rng: rand.New(rand.NewPCG(1, 2))}
	handler := func() *sqsqueue.Handler {
		rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "orders", SafeRate: 1}, rates, nil, clock, nil, nil)
		cfg := consume.Config{Breaker: consume.BreakerConfig{Backoff: consume.Backoff{Jitter: breaker}}}
		h := &sqsqueue.Handler{
			Consumer: consume.New(cfg, rc, s.brownout, clock, nil, nil), Loop: "orders",
			API: api, QueueURL: "http://sqs/q", DeadLetterURL: "http://sqs/dlq",
			RetryBackoff: sqsqueue.DefaultRetryBackoff(), OpenBackoff: sqsqueue.DefaultOpenBackoff(),
		}
		h.RetryBackoff.Jitter, h.OpenBackoff.Jitter = jitter, jitter
		return h
	}
	s.start, s.h, s.fresh = clock.Now(), handler(), handler
	for i := range n {
		s.msgs = append(s.msgs, &simMessage{id: fmt.Sprintf("m-%03d", i), visibleAt: s.start})
	}
	return s
}

// brownoutSink fails each message transiently with the share of Fail
// (none when Fail is zero) for the first For of the simulation, and
// stores the others in Sink.
type brownoutSink struct {
	*memqueue.Sink
	clock *testclock.Clock
	start time.Time
	rng   *rand.Rand
	Fail  float64
	For   time.Duration
}

func (b *brownoutSink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	if b.Fail <= 0 || b.clock.Now().Sub(b.start) >= b.For {
		return b.Sink.Store(ctx, msgs)
	}
	res := make([]consume.Result, len(msgs))
	var pass []consume.Message
	var at []int
	for i, m := range msgs {
		if b.rng.Float64() < b.Fail {
			res[i] = consume.Result{Outcome: consume.Retryable, Reason: "HTTP 503"}
			continue
		}
		pass, at = append(pass, m), append(at, i)
	}
	got, err := b.Sink.Store(ctx, pass)
	if err != nil {
		return nil, err
	}
	for j, i := range at {
		res[i] = got[j]
	}
	return res, nil
}

// receive takes up to 10 visible messages (none dead-lettered or stored),
// each with one more receive, invisible for the queue's 30 s meanwhile.
func (s *mappingSim) receive(now time.Time) ([]*simMessage, events.SQSEvent) {
	var got []*simMessage
	ev := events.SQSEvent{}
	for _, m := range s.msgs {
		if len(got) == 10 {
			break
		}
		if !m.storedAt.IsZero() || m.receives > s.maxReceiveCount || now.Before(m.visibleAt) {
			continue
		}
		m.receives++
		m.receivesAll++
		m.peak = max(m.peak, m.receives)
		if m.receives > s.maxReceiveCount {
			s.deadLettered++
			if s.firstDead.IsZero() {
				s.firstDead = now
			}
			continue
		}
		if m.firstAt.IsZero() {
			m.firstAt = now
		}
		m.visibleAt = now.Add(30 * time.Second)
		got = append(got, m)
		sent := s.start
		if m.copies > 0 {
			sent = m.sentAt
		}
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: m.recordID(), ReceiptHandle: fmt.Sprintf("%s#%d", m.recordID(), m.receives), Body: `{"n":1}`,
			Attributes: map[string]string{"ApproximateReceiveCount": fmt.Sprint(m.receives), "SentTimestamp": fmt.Sprint(sent.UnixMilli()),
				"ApproximateFirstReceiveTimestamp": fmt.Sprint(m.firstAt.UnixMilli())},
			MessageAttributes: m.attrs})
	}
	return got, ev
}

// run plays the simulation until until (virtual time since the start) or
// until every message is settled.
func (s *mappingSim) run(t *testing.T, until time.Duration, freshInstances bool) {
	t.Helper()
	for s.clock.Now().Sub(s.start) < until {
		now := s.clock.Now()
		s.sink.SetDown(now.Sub(s.start) < s.outage)
		got, ev := s.receive(now)
		if len(got) == 0 {
			if s.settled() {
				return
			}
			s.clock.Advance(time.Second) // the mapping's empty long poll
			continue
		}
		if freshInstances {
			s.h = s.fresh()
		}
		sentBefore := len(s.api.sentToQueue(s.h.QueueURL))
		resp, err := s.h.Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		back := map[string]bool{}
		for _, f := range resp.BatchItemFailures {
			back[f.ItemIdentifier] = true
		}
		requeued := map[string]sqstypes.SendMessageBatchRequestEntry{} // by original id
		for _, e := range s.api.sentToQueue(s.h.QueueURL)[sentBefore:] {
			n, id, _ := strings.Cut(aws.ToString(e.MessageAttributes[sqsqueue.RequeueAttribute].StringValue), ":")
			if n == "" || id == "" {
				t.Fatalf("a copy without its %s: %v", sqsqueue.RequeueAttribute, e.MessageAttributes)
			}
			requeued[id] = e
		}
		s.api.mu.Lock()
		for _, m := range got {
			if e, ok := requeued[m.id]; ok { // the mapping deletes the original
				if back[m.recordID()] {
					t.Fatalf("%s both requeued and a batch item failure", m.recordID())
				}
				s.requeues++
				m.copies++
				m.receives, m.firstAt, m.sentAt = 0, time.Time{}, s.clock.Now()
				m.visibleAt = s.clock.Now().Add(time.Duration(e.DelaySeconds) * time.Second)
				m.attrs = map[string]events.SQSMessageAttribute{}
				for k, v := range e.MessageAttributes {
					m.attrs[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
				}
				continue
			}
			if !back[m.recordID()] {
				m.storedAt = s.clock.Now()
				continue
			}
			if v, ok := s.api.visibility[fmt.Sprintf("%s#%d", m.recordID(), m.receives)]; ok {
				m.visibleAt = s.clock.Now().Add(time.Duration(v) * time.Second)
			}
		}
		s.api.mu.Unlock()
		s.clock.Advance(100 * time.Millisecond) // the invocation's own time
	}
}

// settled reports whether every message is stored or dead-lettered.
func (s *mappingSim) settled() bool {
	for _, m := range s.msgs {
		if m.storedAt.IsZero() && m.receives <= s.maxReceiveCount {
			return false
		}
	}
	return true
}

// lastStored returns when the last message was stored, since the start,
// and whether all were.
func (s *mappingSim) lastStored() (time.Duration, bool) {
	var last time.Duration
	for _, m := range s.msgs {
		if m.storedAt.IsZero() {
			return 0, false
		}
		last = max(last, m.storedAt.Sub(s.start))
	}
	return last, true
}

// playFault runs the simulation through a fault of length d (fresh: a
// new instance for every invocation), then until every message is settled
// (36 h at most: what is kept from its last receive returns after 12 h),
// and returns the most receives a message spent during the
// fault, when the last message was stored and whether all were.
func (s *mappingSim) playFault(t *testing.T, d time.Duration, fresh bool) (during int, last time.Duration, ok bool) {
	t.Helper()
	s.run(t, d, fresh)
	during = s.maxReceives()
	s.run(t, 36*time.Hour, fresh)
	last, ok = s.lastStored()
	return during, last, ok
}

// storedAfter returns how many messages were stored later than d after
// the start.
func (s *mappingSim) storedAfter(d time.Duration) int {
	n := 0
	for _, m := range s.msgs {
		if m.storedAt.Sub(s.start) > d {
			n++
		}
	}
	return n
}

// maxReceives returns the most receives any message spent (one copy of
// it: the queue's redrive counts each copy's own).
func (s *mappingSim) maxReceives() int {
	n := 0
	for _, m := range s.msgs {
		n = max(n, m.peak)
	}
	return n
}

// TestShortBlipRecoversWithinAMinute: after a blip of 10 s of a destination
// down (its circuit opens within a second), every message the Lambda handed
// back is stored within about a minute of the blip's start, also with every
// visibility drawn at its longest. Before, what was handed back with the
// circuit open stayed away for OpenBackoff's minutes whatever the outage's
// age: the last message was stored 4 minutes after a 10 s blip.
func TestShortBlipRecoversWithinAMinute(t *testing.T) {
	s := newMappingSim(200, 10*time.Second, highest, highest)
	s.run(t, time.Hour, false)
	last, ok := s.lastStored()
	if !ok || s.deadLettered > 0 {
		t.Fatalf("after a 10 s blip: all stored %v, %d dead-lettered; want all stored, none dead-lettered", ok, s.deadLettered)
	}
	t.Logf("10 s blip: last message stored %v after its start, at most %d receives", last, s.maxReceives())
	if last > 70*time.Second {
		t.Errorf("after a 10 s blip the last message was stored %v after its start; want within about a minute (70 s)", last)
	}
}

// TestLongOutageSpendsFewReceives: through a 15-minute outage with the
// mapping polling all along (no controller holds it off) and every
// visibility drawn at its shortest, no message is received more than 3
// times (maxReceiveCount is 5), and after it every message is stored,
// none dead-lettered. With the mapping held off from 2 minutes into the
// outage until 2 minutes after it (the controller), a message is received
// at most 4 times in all.
func TestLongOutageSpendsFewReceives(t *testing.T) {
	s := newMappingSim(200, 15*time.Minute, lowest, lowest)
	during, last, ok := s.playFault(t, 15*time.Minute, false)
	t.Logf("15 min outage: at most %d receives of a message during it, %d after; last stored %v after its start", during, s.maxReceives(), last)
	if during > 3 {
		t.Errorf("a message was received %d times during a 15-minute outage; want at most 3 (well under maxReceiveCount 5)", during)
	}
	if !ok || s.deadLettered > 0 {
		t.Errorf("after a 15-minute outage: all stored %v, %d dead-lettered; want all stored, none dead-lettered", ok, s.deadLettered)
	}
	// The controller holds the mapping off once it sees the stall (1 to 2
	// ticks of a minute) and lets it receive again after a probe found the
	// destination up (2 minutes after the outage at the latest).
	s = newMappingSim(200, 15*time.Minute, lowest, lowest)
	s.run(t, 2*time.Minute, false)
	s.clock.Advance(15 * time.Minute)
	s.run(t, 12*time.Hour, false)
	if _, ok := s.lastStored(); !ok || s.maxReceives() > 4 || s.deadLettered > 0 {
		t.Errorf("held off from 2 to 17 minutes: all stored %v, at most %d receives, %d dead-lettered; want all stored, at most 4 receives in all, none dead-lettered",
			ok, s.maxReceives(), s.deadLettered)
	}
}

// TestLongOutageOnFreshInstances: the same 15-minute outage when every
// invocation runs on a Lambda instance that has not seen the outage before
// (a mapping that scales its instances, or recycles them): no message is
// received more than 4 times during it, none is dead-lettered, all are
// stored after it. An instance's own breaker knows only how long it has
// seen the destination fail; the message tells how long it has waited
// since its first receive (ApproximateFirstReceiveTimestamp).
func TestLongOutageOnFreshInstances(t *testing.T) {
	s := newMappingSim(200, 15*time.Minute, lowest, lowest)
	during, last, ok := s.playFault(t, 15*time.Minute, true)
	t.Logf("15 min outage, a fresh instance each invocation: at most %d receives during it, %d after; last stored %v after its start", during, s.maxReceives(), last)
	if during > 4 || !ok || s.deadLettered > 0 {
		t.Errorf("15 min outage on fresh instances: at most %d receives during it, all stored %v, %d dead-lettered; want at most 4, all stored, none dead-lettered",
			during, ok, s.deadLettered)
	}
}

// TestLongBrownoutSpendsFewReceives: a destination that fails 90 % of
// the messages for 10 minutes (brownout-90: throttles and 503s, the other
// 10 % stored) with the mapping polling all along: no healthy message is
// dead-lettered and every one is stored after it, on one instance and on a
// fresh instance for every invocation.
func TestLongBrownoutSpendsFewReceives(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		s := newMappingSim(200, 0, lowest, lowest)
		s.brownout.Fail, s.brownout.For = 0.9, 10*time.Minute
		during, last, ok := s.playFault(t, 10*time.Minute, fresh)
		t.Logf("10 min brownout at 90 %%, fresh instances %v: at most %d receives during it, %d in all, %d dead-lettered; last stored %v after its start, %d after 12 h",
			fresh, during, s.maxReceives(), s.deadLettered, last, s.storedAfter(12*time.Hour))
		if !ok || s.deadLettered > 0 {
			t.Errorf("10 min brownout, fresh instances %v: all stored %v, %d dead-lettered; want all stored, none dead-lettered", fresh, ok, s.deadLettered)
		}
	}
}

// TestOpenVisibilityGrowsWithTheOutage: the visibility of a message handed
// back with the circuit open is the outage's age at the first receive,
// four times more at each further one, at least 30 s, at most the
// long backoff by the receive count, plus up to a quarter (the jitter);
// bounded by retention and never below short.
func TestOpenVisibilityGrowsWithTheOutage(t *testing.T) {
	now := time.Now()
	day := 24 * time.Hour
	for _, c := range []struct {
		receives        int
		age, sent       time.Duration // sent: how long ago
		short           time.Duration
		retention       time.Duration
		lowest, highest time.Duration
	}{
		{1, 0, 0, 15 * time.Second, 14 * day, 30 * time.Second, 37500 * time.Millisecond},
		{1, 10 * time.Second, 0, 15 * time.Second, 14 * day, 30 * time.Second, 37500 * time.Millisecond},
		{1, time.Minute, 0, 15 * time.Second, 14 * day, time.Minute, 75 * time.Second},
		{1, 30 * time.Second, 0, 15 * time.Second, 14 * day, 30 * time.Second, 37500 * time.Millisecond},
		{1, 10 * time.Minute, 0, 15 * time.Second, 14 * day, 4 * time.Minute, 5 * time.Minute},
		{2, 30 * time.Second, 0, 30 * time.Second, 14 * day, 2 * time.Minute, 150 * time.Second},
		{2, 3 * time.Minute, 0, 30 * time.Second, 14 * day, 8 * time.Minute, 10 * time.Minute},
		{2, 15 * time.Second, 0, 30 * time.Second, 14 * day, time.Minute, 75 * time.Second},
		{3, 2 * time.Minute, 0, time.Minute, 14 * day, 16 * time.Minute, 20 * time.Minute},
		{9, 3 * time.Hour, 0, time.Minute, 14 * day, time.Hour, time.Hour},
		{1, 0, 0, 2 * time.Minute, 14 * day, 2 * time.Minute, 2 * time.Minute},                   // short is the floor
		{3, 2 * time.Minute, 0, time.Minute, 10 * time.Minute, 9 * time.Minute, 9 * time.Minute}, // retention
		{3, 2 * time.Minute, 5 * time.Minute, time.Minute, 10 * time.Minute, 4 * time.Minute, 4 * time.Minute},
		{3, 2 * time.Minute, 0, 20 * time.Second, 0, 20 * time.Second, 20 * time.Second}, // retention unknown
	} {
		m := consume.Message{ID: "m", ReceiveCount: c.receives, SentAt: now.Add(-c.sent)}
		for _, j := range []struct {
			name string
			f    func(time.Duration) time.Duration
			want time.Duration
		}{{"lowest", lowest, c.lowest}, {"highest", highest, c.highest}} {
			b := sqsqueue.DefaultOpenBackoff()
			b.Jitter = j.f
			if got := sqsqueue.OpenVisibility(b, m, c.short, c.retention, now, c.age); got != j.want {
				t.Errorf("receive %d, outage %v, sent %v ago, short %v, retention %v, jitter %s: %v; want %v",
					c.receives, c.age, c.sent, c.short, c.retention, j.name, got, j.want)
			}
		}
	}
}

// Both conversions carry the message's first receive, which
// OpenVisibility takes for the outage's age on an instance that has not
// seen it fail.
func TestMessageTellsItsFirstReceive(t *testing.T) {
	attrs := map[string]string{"ApproximateReceiveCount": "3", "SentTimestamp": "1796280318223", "ApproximateFirstReceiveTimestamp": "1796280318599"}
	want := time.UnixMilli(1796280318599)
	ev := sqsqueue.FromEvent(events.SQSMessage{MessageId: "m", Attributes: attrs})
	sdk := sqsqueue.FromSQS(sqstypes.Message{MessageId: aws.String("m"), Attributes: attrs})
	for name, m := range map[string]consume.Message{"FromEvent": ev, "FromSQS": sdk} {
		if !m.FirstReceivedAt.Equal(want) || m.ReceiveCount != 3 || !m.SentAt.Equal(time.UnixMilli(1796280318223)) {
			t.Errorf("%s: first receive %v, receives %d, sent %v; want %v, 3, the sent time", name, m.FirstReceivedAt, m.ReceiveCount, m.SentAt, want)
		}
	}
	if m := sqsqueue.FromEvent(events.SQSMessage{MessageId: "m"}); !m.FirstReceivedAt.IsZero() {
		t.Errorf("no attribute: first receive %v; want zero", m.FirstReceivedAt)
	}
}

// seeded returns a Backoff jitter that draws uniformly in [0, c] from a
// generator seeded with seed: random draws, the same in every run.
func seeded(seed uint64) func(time.Duration) time.Duration {
	rng := rand.New(rand.NewPCG(seed, 3))
	return func(c time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(c) + 1)) }
}

// TestBrownoutDelaysNoMessageByHours: a 10-minute brownout at 90 % with
// the mapping polling all along and random draws (5 seeds x 200
// messages, on one instance and on a fresh instance for every
// invocation): every message is stored within an hour of the start, none
// dead-lettered. A message whose fourth receive (of 5) fails in the
// brownout is sent again to the queue as a copy with a fresh receive
// count, delayed by at most SQS's 15 minutes; before, it was kept
// invisible for 12 h for its last receive (131 of 4,000 messages in 20
// runs), so that a 10-minute brownout delayed some messages by 12 h.
func TestBrownoutDelaysNoMessageByHours(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		late, dead, requeues, most := 0, 0, 0, 0
		var last time.Duration
		for seed := range uint64(5) {
			s := newMappingSim(200, 0, seeded(seed), seeded(seed+100))
			s.brownout.Fail, s.brownout.For = 0.9, 10*time.Minute
			s.brownout.rng = rand.New(rand.NewPCG(seed, 2))
			_, l, ok := s.playFault(t, 10*time.Minute, fresh)
			if !ok {
				t.Errorf("seed %d, fresh instances %v: not every message stored", seed, fresh)
			}
			late, dead, requeues, last = late+s.storedAfter(time.Hour), dead+s.deadLettered, requeues+s.requeues, max(last, l)
			for _, m := range s.msgs {
				most = max(most, m.copies)
			}
		}
		t.Logf("10 min brownout at 90 %%, 5 x 200, fresh instances %v: %d requeued (at most %d times one message), %d dead-lettered, %d stored after 1 h; the last stored %v after the start",
			fresh, requeues, most, dead, late, last)
		if late > 0 || dead > 0 {
			t.Errorf("fresh instances %v: %d stored later than 1 h after the start, %d dead-lettered; want none", fresh, late, dead)
		}
	}
}

// TestEndlessOutageEndsInTheDeadLetterQueue: a destination that never
// recovers (the mapping polling all along, every draw at its shortest)
// does not keep its messages in a loop of requeues: each is requeued
// DefaultMaxRequeues times, then kept for its last receives (12 h each),
// then dead-lettered by the queue's redrive. The requeues amount to
// hours: the first dead letter comes at least 10 h later than without
// requeues (MaxRequeues -1).
func TestEndlessOutageEndsInTheDeadLetterQueue(t *testing.T) {
	var firsts []time.Duration
	for _, limit := range []int{-1, 0} {
		s := newMappingSim(50, 1000*time.Hour, lowest, lowest)
		s.h.MaxRequeues = limit
		s.run(t, 100*time.Hour, false)
		most, least := 0, math.MaxInt
		for _, m := range s.msgs {
			most, least = max(most, m.copies), min(least, m.copies)
		}
		first := s.firstDead.Sub(s.start)
		firsts = append(firsts, first)
		t.Logf("endless outage, 50 messages, MaxRequeues %d: %d dead-lettered, requeued %d to %d times each; the first dead-lettered %v after the start",
			limit, s.deadLettered, least, most, first)
		want := sqsqueue.DefaultMaxRequeues
		if limit < 0 {
			want = 0
		}
		if s.deadLettered != 50 || most != want || least != want {
			t.Errorf("MaxRequeues %d: %d of 50 dead-lettered, requeued %d to %d times; want all, each %d times", limit, s.deadLettered, least, most, want)
		}
	}
	if firsts[1] < firsts[0]+10*time.Hour {
		t.Errorf("the first dead letter %v after the outage's start with requeues, %v without; want the requeues to add at least 10 h", firsts[1], firsts[0])
	}
}
