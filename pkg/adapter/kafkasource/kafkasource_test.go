package kafkasource_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-dev/sluice/internal/testclock"
	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// fixedRate is a pacer rate for the pause tests.
type fixedRate float64

func (r fixedRate) Rate() float64 { return float64(r) }

func newSource(t *testing.T, brokers []string, topic, group string, pacer kafkasource.RateSource) *kafkasource.Source {
	t.Helper()
	src, err := kafkasource.New(kafkasource.Config{Brokers: brokers, Topics: []string{topic}, Group: group, Pacer: pacer, Opts: fastGroup,
		CommitInterval: -1}) // every Ack commits: the tests look at the group's offsets right after
	if err != nil {
		t.Fatalf("kafkasource.New: %v", err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	return src
}

// receiveN receives until it has n messages; Receive errors are logged and
// retried.
func receiveN(t *testing.T, src *kafkasource.Source, n int) []consume.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []consume.Message
	for len(out) < n {
		ms, err := src.Receive(ctx, n-len(out))
		if err != nil {
			t.Logf("Receive: %v (retrying, as consume.Consumer.Run does)", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("Receive: got %d of %d messages before the timeout", len(out), n)
		}
		out = append(out, ms...)
	}
	return out
}

// receivedFromFake starts a one-partition fake cluster whose topic holds n
// records, ids prefix-0 on, and a source of group g that has received them
// all.
func receivedFromFake(t *testing.T, topic, prefix string, n int) (*kfake.Cluster, *kafkasource.Source, []consume.Message) {
	t.Helper()
	c := newFake(t, topic, 1)
	produce(t, c.ListenAddrs(), topic, prefix, 0, n, nil)
	src := newSource(t, c.ListenAddrs(), topic, "g", nil)
	return c, src, receiveN(t, src, n)
}

// ackWantCommitted acknowledges msgs, then checks that group g's committed
// offset of topic's partition 0 is want; when says at what point.
func ackWantCommitted(t *testing.T, src *kafkasource.Source, brokers []string, topic string, msgs []consume.Message, want int64, when string) {
	t.Helper()
	if err := src.Ack(context.Background(), msgs); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if got := committed(t, brokers, "g", topic)[0]; got != want {
		t.Errorf("committed offset %s = %d; want %d", when, got, want)
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  kafkasource.Config
	}{
		{"no brokers", kafkasource.Config{Topics: []string{"t"}, Group: "g"}},
		{"no topics", kafkasource.Config{Brokers: []string{"127.0.0.1:1"}, Group: "g"}},
		{"no group", kafkasource.Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := kafkasource.New(tt.cfg); err == nil {
				t.Errorf("New(%+v) = nil error; want one", tt.cfg)
			}
		})
	}
}

func TestMessageIDs(t *testing.T) {
	c := newFake(t, "ids", 1)
	brokers := c.ListenAddrs()
	produce(t, brokers, "ids", "x", 0, 1, nil)
	cl := client(t, brokers, kgo.DefaultProduceTopic("ids"))
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte("k"), Value: []byte(`{}`)}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	msgs := receiveN(t, newSource(t, brokers, "ids", "g", nil), 2)
	for i, want := range []string{"x-0", "ids/0/1"} {
		if msgs[i].ID != want {
			t.Errorf("message %d: ID = %q; want %q", i, msgs[i].ID, want)
		}
		if msgs[i].ReceiveCount != 1 {
			t.Errorf("message %d: ReceiveCount = %d; want 1", i, msgs[i].ReceiveCount)
		}
		if msgs[i].FirstReceivedAt.IsZero() {
			t.Errorf("message %d: no FirstReceivedAt; want the time it was first handed out", i)
		}
	}
	if got := msgs[1].Attributes["kafka.key"]; got != "k" {
		t.Errorf("Attributes[kafka.key] = %q; want %q", got, "k")
	}
}

// TestCommitsOnlyStoredPrefix: an unstored record holds its partition's
// commit back until it is stored.
func TestCommitsOnlyStoredPrefix(t *testing.T) {
	c, src, msgs := receivedFromFake(t, "prefix", "s", 10)
	brokers := c.ListenAddrs()
	ctx := context.Background()

	ackWantCommitted(t, src, brokers, "prefix", append(append([]consume.Message{}, msgs[:4]...), msgs[5:]...), 4, "with offset 4 unstored")
	if lag, err := src.Lag(ctx); err != nil || lag != 6 {
		t.Errorf("Lag() with 4 of 10 committed = %d, %v; want 6, nil", lag, err)
	}
	if err := src.Release(ctx, msgs[4:5]); err != nil {
		t.Fatalf("Release: %v", err)
	}
	again := receiveN(t, src, 1)
	if again[0].ID != "s-4" || again[0].ReceiveCount != 2 {
		t.Errorf("redelivered (ID, ReceiveCount) = (%q, %d); want (%q, 2)", again[0].ID, again[0].ReceiveCount, "s-4")
	}
	if !again[0].FirstReceivedAt.Equal(msgs[4].FirstReceivedAt) || again[0].FirstReceivedAt.IsZero() {
		t.Errorf("redelivered FirstReceivedAt = %v; want its first hand-out's, %v", again[0].FirstReceivedAt, msgs[4].FirstReceivedAt)
	}
	ackWantCommitted(t, src, brokers, "prefix", again, 10, "after storing everything")
}

// TestCloseLeavesUnsettledUncommitted: on shutdown what was stored is
// committed and the rest comes to the next member.
func TestCloseLeavesUnsettledUncommitted(t *testing.T) {
	c, src, msgs := receivedFromFake(t, "close", "c", 10)
	brokers := c.ListenAddrs()
	if err := src.Ack(context.Background(), msgs[:6]); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if err := src.Close(context.Background()); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := src.Receive(context.Background(), 1); !errors.Is(err, kafkasource.ErrClosed) {
		t.Errorf("Receive after Close: err = %v; want ErrClosed", err)
	}
	if got := committed(t, brokers, "g", "close")[0]; got != 6 {
		t.Errorf("committed offset after Close = %d; want 6", got)
	}
	next := receiveN(t, newSource(t, brokers, "close", "g", nil), 4)
	if next[0].ID != "c-6" {
		t.Errorf("next member's first message = %q; want %q", next[0].ID, "c-6")
	}
}

// TestCommitFailureIsRetried: a failed commit is reported, and the next
// commit covers what it missed.
func TestCommitFailureIsRetried(t *testing.T) {
	c, src, msgs := receivedFromFake(t, "cfail", "f", 10)
	brokers := c.ListenAddrs()
	failed := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Err: kerr.OffsetMetadataTooLarge})
	if err := src.Ack(context.Background(), msgs[:5]); err == nil {
		t.Errorf("Ack with the commit failing = nil error; want one")
	}
	if failed.Hits() != 1 {
		t.Fatalf("injected commit failures = %d; want 1", failed.Hits())
	}
	if got, ok := committed(t, brokers, "g", "cfail")[0]; ok {
		t.Errorf("committed offset after a failed commit = %d; want none", got)
	}
	ackWantCommitted(t, src, brokers, "cfail", msgs[5:], 10, "after the next commit")
	if got := src.Stats().CommitErrors.Load(); got != 1 {
		t.Errorf("Stats().CommitErrors = %d; want 1", got)
	}
}

// TestDeadLetterBeforeCommit: a poison record's offset is committed only
// after the dead-letter topic took it; a failed dead-letter produce leaves it
// uncommitted and hands it out again.
func TestDeadLetterBeforeCommit(t *testing.T) {
	c := newFake(t, "dl", 1)
	brokers := c.ListenAddrs()
	produce(t, brokers, "dl", "d", 0, 2, func(i int) bool { return i == 0 })
	src := newSource(t, brokers, "dl", "g", nil)
	ctx := context.Background()
	msgs := receiveN(t, src, 2)
	if err := src.Ack(ctx, msgs[1:]); err != nil {
		t.Fatalf("Ack: %v", err)
	}
	if got, ok := committed(t, brokers, "g", "dl")[0]; ok {
		t.Errorf("committed offset with the poison record unsettled = %d; want none", got)
	}

	failed := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.TopicAuthorizationFailed})
	if err := src.DeadLetter(ctx, []consume.Poison{{Message: msgs[0], Reason: "bad body"}}); err == nil {
		t.Errorf("DeadLetter with the produce failing = nil error; want one")
	}
	if failed.Hits() == 0 {
		t.Fatalf("the injected produce failure was not hit")
	}
	if got, ok := committed(t, brokers, "g", "dl")[0]; ok {
		t.Errorf("committed offset after a failed dead-letter produce = %d; want none", got)
	}
	// The source produces the refused dead letter again itself, from a
	// later Receive, without handing the record out again.
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	for rctx.Err() == nil && src.Stats().DeadLettered.Load() == 0 {
		if again, _ := src.Receive(rctx, 1); len(again) > 0 {
			t.Fatalf("message %q handed out again after the refused dead letter; want it produced by the source", again[0].ID)
		}
	}
	if got := committed(t, brokers, "g", "dl")[0]; got != 2 {
		t.Errorf("committed offset after dead-lettering = %d; want 2", got)
	}
	dead := readAll(t, brokers, "dl.dlt")
	if len(dead) != 1 {
		t.Fatalf("dl.dlt holds %d records; want 1", len(dead))
	}
	h := map[string]string{}
	for _, kv := range dead[0].Headers {
		h[kv.Key] = string(kv.Value)
	}
	want := map[string]string{kafkasource.HeaderReason: "bad body", kafkasource.HeaderOrigin: "dl/0/0", kafkasource.HeaderID: "d-0", "message-id": "d-0"}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("dead letter header %s = %q; want %q", k, h[k], v)
		}
	}
}

// TestFetchFailuresRecover: fetches that fail (connection closed by the
// broker) are retried by the client and nothing is lost.
func TestFetchFailuresRecover(t *testing.T) {
	c := newFake(t, "ffail", 2)
	brokers := c.ListenAddrs()
	ids := produce(t, brokers, "ffail", "r", 0, 200, nil)
	var failed atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		if failed.Load() >= 3 {
			c.DropControl()
			return nil, nil, false
		}
		failed.Add(1)
		c.KeepControl()
		return nil, errors.New("injected fetch failure"), true
	})
	sink := memqueue.NewSink()
	w := startWorker(t, brokers, "ffail", "g", sink, 1e6)
	waitFor(t, 60*time.Second, "200 messages stored", func() bool { return sink.Len() == 200 })
	w.stop()
	if failed.Load() != 3 {
		t.Errorf("injected fetch failures = %d; want 3", failed.Load())
	}
	if m := missing(ids, sink.Has); len(m) > 0 {
		t.Errorf("%d messages missing after fetch failures", len(m))
	}
	checkNeverPastUnstored(t, brokers, "g", "ffail", sink.Has)
}

// TestPausesWhenOutOfBudget: a batch that needs more than PauseAfter at the
// pacer's rate pauses fetching until the next Receive.
func TestPausesWhenOutOfBudget(t *testing.T) {
	tests := []struct {
		name      string
		rate      float64
		batch     int
		wantPause bool
	}{
		{"slow rate, big batch", 1, 10, true},
		{"zero rate", 0, 1, true},
		{"batch within a second", 10, 10, false},
		{"no limit", math.Inf(1), 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			topic := "pause" + strings.ReplaceAll(tt.name, " ", "")
			topic = strings.ReplaceAll(topic, ",", "")
			c := newFake(t, topic, 1)
			brokers := c.ListenAddrs()
			produce(t, brokers, topic, "q", 0, 2*tt.batch, nil)
			src := newSource(t, brokers, topic, "g", fixedRate(tt.rate))
			receiveN(t, src, tt.batch)
			if got := src.Paused(); got != tt.wantPause {
				t.Fatalf("Paused() after a batch of %d at %v/s = %v; want %v", tt.batch, tt.rate, got, tt.wantPause)
			}
			if !tt.wantPause {
				return
			}
			var fetches atomic.Int64
			c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				fetches.Add(1)
				return nil, nil, false
			})
			time.Sleep(time.Second) // FetchMaxWait is 200 ms: an unpaused client fetches about 5 times
			if got := fetches.Load(); got > 1 {
				t.Errorf("fetch requests in 1 s while paused = %d; want at most 1 (one in flight)", got)
			}
			receiveN(t, src, 1)
			if got := src.Stats().Pauses.Load(); got < 1 {
				t.Errorf("Stats().Pauses = %d; want >= 1", got)
			}
		})
	}
}

func TestRebalanceNoLossFake(t *testing.T) {
	c := newFake(t, "reb", 4)
	scenarioRebalance(t, c.ListenAddrs(), "reb", "g", 2000)
}

func TestPoisonToDeadLetterTopicFake(t *testing.T) {
	c := newFake(t, "poison", 2)
	scenarioPoison(t, c.ListenAddrs(), "poison", "g")
}

func TestKilledConsumerNoLossFake(t *testing.T) {
	if testing.Short() {
		t.Skip("waits a session timeout for the killed member")
	}
	c := newFake(t, "kill", 3)
	scenarioKill(t, c.ListenAddrs(), "kill", "g", 2000)
}

// TestLostPartitionsAreNotCommitted: after the member is fenced (heartbeat
// answered UNKNOWN_MEMBER_ID, partitions lost), acknowledging the batch it
// still holds commits nothing; the records come again after it rejoins.
func TestLostPartitionsAreNotCommitted(t *testing.T) {
	c, src, held := receivedFromFake(t, "lost", "l", 10)
	brokers := c.ListenAddrs()
	ctx := context.Background()
	var fenced atomic.Int64
	c.ControlKey(int16(kmsg.Heartbeat), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fenced.Add(1)
		resp := kreq.(*kmsg.HeartbeatRequest).ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = kerr.UnknownMemberID.Code
		return resp, nil, true
	})
	waitFor(t, 30*time.Second, "the partitions to be lost", func() bool { return src.Stats().Lost.Load() > 0 })
	if err := src.Ack(ctx, held); err != nil {
		t.Fatalf("Ack of a batch from lost partitions: %v", err)
	}
	if got, ok := committed(t, brokers, "g", "lost")[0]; ok {
		t.Errorf("committed offset after acknowledging records of a lost partition = %d; want none", got)
	}
	again := receiveN(t, src, 10)
	if again[0].ID != "l-0" {
		t.Errorf("first record after rejoining = %q; want l-0 (redelivered from the last commit)", again[0].ID)
	}
	ackWantCommitted(t, src, brokers, "lost", again, 10, "after storing the redelivered records")
}

// TestCommitInterval: with a CommitInterval, Ack commits at most once per
// interval, and an idle Receive commits what waits once the interval passed.
func TestCommitInterval(t *testing.T) {
	c := newFake(t, "ival", 1)
	brokers := c.ListenAddrs()
	produce(t, brokers, "ival", "i", 0, 10, nil)
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	src, err := kafkasource.New(kafkasource.Config{Brokers: brokers, Topics: []string{"ival"}, Group: "g", Opts: fastGroup,
		CommitInterval: time.Hour, Clock: clk})
	if err != nil {
		t.Fatalf("kafkasource.New: %v", err)
	}
	defer src.Close(context.Background())
	ctx := context.Background()
	msgs := receiveN(t, src, 10)
	steps := []struct {
		ack     []consume.Message
		advance time.Duration
		want    int64
	}{
		{msgs[0:3], 0, 3},         // first commit: none before
		{msgs[3:6], 0, 3},         // within the interval: not yet
		{msgs[6:8], time.Hour, 8}, // interval passed: commits everything settled
		{msgs[8:10], 0, 8},        // within the interval again
	}
	for i, st := range steps {
		clk.Advance(st.advance)
		if err := src.Ack(ctx, st.ack); err != nil {
			t.Fatalf("step %d: Ack: %v", i, err)
		}
		if got := committed(t, brokers, "g", "ival")[0]; got != st.want {
			t.Errorf("step %d: committed offset = %d; want %d", i, got, st.want)
		}
	}
	clk.Advance(time.Hour)
	rctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if ms, err := src.Receive(rctx, 10); len(ms) != 0 || err != nil {
		t.Fatalf("idle Receive = %d messages, %v; want none, nil", len(ms), err)
	}
	if got := committed(t, brokers, "g", "ival")[0]; got != 10 {
		t.Errorf("committed offset after an idle Receive past the interval = %d; want 10", got)
	}
}

func TestDeadLetterTopicName(t *testing.T) {
	tests := []struct {
		configured, want string
	}{
		{"", "orders.dlt"},
		{"poison", "poison"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			c := newFake(t, "orders", 1)
			brokers := c.ListenAddrs()
			createTopic(t, brokers, tt.want, 1)
			produce(t, brokers, "orders", "o", 0, 1, nil)
			src, err := kafkasource.New(kafkasource.Config{Brokers: brokers, Topics: []string{"orders"}, Group: "g", DeadLetterTopic: tt.configured, Opts: fastGroup})
			if err != nil {
				t.Fatalf("kafkasource.New: %v", err)
			}
			defer src.Close(context.Background())
			msgs := receiveN(t, src, 1)
			if err := src.DeadLetter(context.Background(), []consume.Poison{{Message: msgs[0], Reason: "r"}}); err != nil {
				t.Fatalf("DeadLetter: %v", err)
			}
			if got := len(readAll(t, brokers, tt.want)); got != 1 {
				t.Errorf("DeadLetterTopic %q: %s holds %d records; want 1", tt.configured, tt.want, got)
			}
		})
	}
}
