package kafkasource_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// fastGroup makes group membership react in well under a second, so that
// rebalances in tests take little time (production keeps franz-go's
// defaults).
var fastGroup = []kgo.Opt{
	kgo.HeartbeatInterval(100 * time.Millisecond),
	kgo.SessionTimeout(6 * time.Second),
	kgo.RebalanceTimeout(10 * time.Second),
	kgo.FetchMaxWait(200 * time.Millisecond),
}

// testLog is nil (discard) unless a debugging test file sets it.
var testLog *slog.Logger

// newFake starts an in-process kfake cluster with topic of partitions.
func newFake(t testing.TB, topic string, partitions int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1), kfake.SeedTopics(partitions, topic), kfake.AllowAutoTopicCreation()}, opts...)...)
	if err != nil {
		t.Fatalf("kfake.NewCluster: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func client(t testing.TB, brokers []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatalf("kgo.NewClient: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates topic (a real broker has no topics seeded).
func createTopic(t testing.TB, brokers []string, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, partitions, 1, nil, topic); err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// produce writes n records body {"seq":i} with header message-id "<prefix>-i"
// for i in [from, from+n); poison(i) true writes a malformed body instead.
// It returns the ids written.
func produce(t testing.TB, brokers []string, topic, prefix string, from, n int, poison func(int) bool) []string {
	t.Helper()
	cl := client(t, brokers, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ids := make([]string, 0, n)
	recs := make([]*kgo.Record, 0, n)
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		body := fmt.Sprintf(`{"seq":%d}`, i)
		if poison != nil && poison(i) {
			body = fmt.Sprintf("not json %d", i)
		}
		recs = append(recs, &kgo.Record{Value: []byte(body), Headers: []kgo.RecordHeader{{Key: "message-id", Value: []byte(id)}}})
		ids = append(ids, id)
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records to %s: %v", n, topic, err)
	}
	return ids
}

// worker is one consumer (the same consume.Consumer the worker runs) reading
// a kafkasource.Source.
type worker struct {
	src    *kafkasource.Source
	cancel context.CancelFunc
	done   chan error
}

// startWorker starts a consumer at the allowed rate (messages/s).
func startWorker(t *testing.T, brokers []string, topic, group string, sink consume.Sink, rate float64) *worker {
	t.Helper()
	return startWorkerWith(t, sink, rate, consume.Config{BatchSize: 50}, kafkasource.Config{Brokers: brokers, Topics: []string{topic}, Group: group})
}

// startWorkerWith starts a consumer with cc at the allowed rate on a source
// with sc, its Pacer, Opts and Log filled in.
func startWorkerWith(t *testing.T, sink consume.Sink, rate float64, cc consume.Config, sc kafkasource.Config) *worker {
	t.Helper()
	rates := memqueue.NewRates()
	rates.Put(protocol.Rate{Loop: "kafka", PerSecond: rate})
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "kafka", SafeRate: 1e6}, rates, nil, consume.WallClock{}, nil, nil)
	c := consume.New(cc, rc, sink, consume.WallClock{}, nil, nil)
	sc.Pacer, sc.Opts, sc.Log = c.Pacer(), fastGroup, testLog
	src, err := kafkasource.New(sc)
	if err != nil {
		t.Fatalf("kafkasource.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &worker{src: src, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := c.Run(ctx, src)
		if cerr := src.Close(context.Background()); err == nil {
			err = cerr
		}
		w.done <- err
	}()
	t.Cleanup(w.stop)
	return w
}

// stop cancels the worker and waits for it to commit and leave.
func (w *worker) stop() {
	w.cancel()
	if w.done != nil {
		<-w.done
		w.done = nil
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// committed returns the group's committed offsets for topic.
func committed(t *testing.T, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	adm := kadm.NewClient(client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	os, err := adm.FetchOffsetsForTopics(ctx, group, topic)
	if err != nil {
		t.Fatalf("fetch offsets of group %s: %v", group, err)
	}
	out := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.At >= 0 {
			out[o.Partition] = o.At
		}
	})
	return out
}

// committedTotal is the sum of the group's committed offsets for topic.
func committedTotal(t *testing.T, brokers []string, group, topic string) (int64, map[int32]int64) {
	t.Helper()
	offs := committed(t, brokers, group, topic)
	var total int64
	for _, o := range offs {
		total += o
	}
	return total, offs
}

// readAll reads topic from the start up to its current end.
func readAll(t *testing.T, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	adm := kadm.NewClient(client(t, brokers))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	want := 0
	ends.Each(func(o kadm.ListedOffset) { want += int(o.Offset) })
	if want == 0 {
		return nil
	}
	cl := client(t, brokers, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: got %d of %d records: %v", topic, len(out), want, ctx.Err())
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// checkNeverPastUnstored asserts the commit invariant: every record of topic
// below the group's committed offset of its partition is stored.
func checkNeverPastUnstored(t *testing.T, brokers []string, group, topic string, stored func(id string) bool) {
	t.Helper()
	offs := committed(t, brokers, group, topic)
	for _, r := range readAll(t, brokers, topic) {
		if r.Offset < offs[r.Partition] && !stored(kafkasource.MessageID(r, "message-id")) {
			t.Errorf("group %s committed %s/%d at %d, past record %s that is not stored", group, topic, r.Partition, offs[r.Partition], kafkasource.Origin(r))
		}
	}
}

// missing returns the ids not stored.
func missing(ids []string, stored func(string) bool) []string {
	var out []string
	for _, id := range ids {
		if !stored(id) {
			out = append(out, id)
		}
	}
	return out
}

// fileSink stores ids as lines of a file, synced before Store returns: a
// sink that outlives a SIGKILLed process. Storing an id twice writes it
// twice; idempotency is the reader's (set of lines).
type fileSink struct {
	mu sync.Mutex
	f  *os.File
}

var _ consume.Sink = (*fileSink)(nil)

func (s *fileSink) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.ID + "\n")
	}
	if _, err := s.f.WriteString(b.String()); err != nil {
		return nil, err
	}
	if err := s.f.Sync(); err != nil {
		return nil, err
	}
	return make([]consume.Result, len(msgs)), nil
}

// readLines returns the ids in a fileSink's file, and how many lines.
func readLines(t *testing.T, path string) (map[string]int, int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return map[string]int{}, 0
		}
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	out := map[string]int{}
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if id := sc.Text(); id != "" {
			out[id]++
			n++
		}
	}
	return out, n
}
