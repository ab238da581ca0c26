package localaws

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
)

// kafkaFixture is a kfake cluster with topic "orders" of two partitions
// holding n records, and a poller in group "g" invoking rie.
func kafkaFixture(t *testing.T, n int, rie *fakeRIE) (*KafkaPoller, *kfake.Cluster) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: "orders", Partition: int32(i % 2), Key: []byte(fmt.Sprint("k", i)),
			Value: []byte(fmt.Sprintf(`{"seq":%d}`, i)), Headers: []kgo.RecordHeader{{Key: "bin", Value: []byte{0xff, 0x00, 0x80}}}}
		if err := prod.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(rie)
	t.Cleanup(srv.Close)
	cl, err := NewKafkaClient(c.ListenAddrs(), "g", []string{"orders"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &KafkaPoller{Client: cl, Invoker: &RIE{URL: srv.URL}, BatchSize: 8, Window: 50 * time.Millisecond,
		RetryWait: 10 * time.Millisecond}, c
}

// delivered decodes the records of a Kafka event payload the way the
// consumer Lambda does.
func delivered(t *testing.T, payload []byte) []string {
	t.Helper()
	var ev events.KafkaEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		t.Fatalf("payload is no KafkaEvent: %v", err)
	}
	msgs, poison := kafkasource.EventMessages(ev, "")
	if len(poison) > 0 || ev.EventSource != "aws:kafka" {
		t.Fatalf("event %s: source %q, undecodable %v", payload, ev.EventSource, poison)
	}
	var out []string
	for _, m := range msgs {
		if !bytes.Equal(m.Handle.(*kgo.Record).Headers[0].Value, []byte{0xff, 0x00, 0x80}) || m.Attributes["kafka.key"] == "" {
			t.Errorf("record %s lost its key or header bytes: %+v", m.ID, m.Handle)
		}
		out = append(out, m.ID)
	}
	return out
}

// TestKafkaPollerRetriesThenCommits: a failed invocation is retried with
// the same batch, the batch is committed only after the invocation
// succeeded, and every record is invoked successfully exactly once; a new
// member of the group then finds nothing left.
func TestKafkaPollerRetriesThenCommits(t *testing.T) {
	calls := 0
	rie := &fakeRIE{respond: func([]byte) (int, string) {
		calls++
		if calls <= 2 {
			return 200, `{"errorMessage":"3 failed at the destination","errorType":"wrapError"}`
		}
		return 200, `null`
	}}
	p, _ := kafkaFixture(t, 20, rie)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[string]int{}
	for len(seen) < 20 && ctx.Err() == nil {
		res, err := p.PollOnce(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if res.Records > 0 && !res.Committed {
			t.Fatalf("batch %v not committed after %d invocations: %v", res.Origins, res.Invocations, res.LastErr)
		}
		if res.Records > 0 {
			for _, id := range delivered(t, rie.payloads[len(rie.payloads)-1]) {
				seen[id]++
			}
		}
	}
	if !bytes.Equal(rie.payloads[0], rie.payloads[2]) {
		t.Errorf("the retried invocation carried another batch:\n%s\n%s", rie.payloads[0], rie.payloads[2])
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("record %s invoked successfully %d times; want 1", id, n)
		}
	}
	if len(seen) != 20 {
		t.Errorf("records invoked successfully = %d; want 20", len(seen))
	}
	offs, err := kadm.NewClient(p.Client).FetchOffsets(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for part := int32(0); part < 2; part++ {
		if o, ok := offs.Lookup("orders", part); !ok || o.At != 10 {
			t.Errorf("committed offset of orders/%d = %+v; want 10", part, o)
		}
	}
}

// kafkaFixtureMember is another poller in group "g" of c.
func kafkaFixtureMember(t *testing.T, c *kfake.Cluster) (*KafkaPoller, *fakeRIE) {
	rie := &fakeRIE{respond: func([]byte) (int, string) { return 200, "null" }}
	srv := httptest.NewServer(rie)
	t.Cleanup(srv.Close)
	cl, err := NewKafkaClient(c.ListenAddrs(), "g", []string{"orders"}, kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return &KafkaPoller{Client: cl, Invoker: &RIE{URL: srv.URL}, Window: 50 * time.Millisecond}, rie
}

// TestKafkaPollerUncommittedOnShutdown: a batch whose invocation keeps
// failing is not committed; the next member of the group gets it again.
func TestKafkaPollerUncommittedOnShutdown(t *testing.T) {
	rie := &fakeRIE{respond: func([]byte) (int, string) { return 200, `{"errorMessage":"down","errorType":"x"}` }}
	p, c := kafkaFixture(t, 4, rie)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	res, err := p.PollOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Committed || res.Records == 0 || res.Invocations < 2 {
		t.Fatalf("PollOnce = %+v; want an uncommitted batch invoked several times", res)
	}
	p.Client.Close()
	again, _ := kafkaFixtureMember(t, c)
	ctx2, cancel2 := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel2()
	res2, err := again.PollOnce(ctx2)
	if err != nil || res2.Records == 0 || res2.Origins[0] != res.Origins[0] {
		t.Errorf("new member got %v (%v); want the uncommitted batch from %s again", res2.Origins, err, res.Origins[0])
	}
}

// TestKafkaPollerDiscardsAfterMaxRetries: with MaxRetries the batch is
// discarded (committed, reported) after that many retries.
func TestKafkaPollerDiscardsAfterMaxRetries(t *testing.T) {
	rie := &fakeRIE{respond: func([]byte) (int, string) { return 200, `{"errorMessage":"down","errorType":"x"}` }}
	p, _ := kafkaFixture(t, 2, rie)
	p.MaxRetries = 2
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.PollOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var fe *FunctionError
	if !res.Discarded || res.Committed || res.Invocations != 3 || !errors.As(res.LastErr, &fe) {
		t.Errorf("PollOnce = %+v; want discarded after 3 invocations with the function error", res)
	}
}

// failureRecorder is an on-failure destination that records what it got.
type failureRecorder struct{ got []KafkaFailure }

func (f *failureRecorder) SendKafkaFailure(_ context.Context, r KafkaFailure) error {
	f.got = append(f.got, r)
	return nil
}

// TestKafkaPollerOnFailureDestination: with an on-failure destination and
// no retry limit, AWS retries a failed batch at most 10 times, then
// commits past it and sends the destination only the batch's metadata
// (partitions and offsets, never the records).
func TestKafkaPollerOnFailureDestination(t *testing.T) {
	rie := &fakeRIE{respond: func([]byte) (int, string) { return 200, `{"errorMessage":"down","errorType":"x"}` }}
	p, _ := kafkaFixture(t, 2, rie)
	dest := &failureRecorder{}
	p.OnFailure = dest
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.PollOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Discarded || res.Invocations != 11 {
		t.Fatalf("PollOnce = %+v; want discarded after 11 invocations (1 + 10 retries)", res)
	}
	if len(dest.got) != 1 {
		t.Fatalf("destination got %d failures; want 1", len(dest.got))
	}
	f := dest.got[0]
	b, _ := json.Marshal(f)
	if f.Condition != "RetryAttemptsExhausted" || f.ApproximateInvokeCount != 11 || f.BatchSize != res.Records ||
		len(f.Partitions) == 0 || bytes.Contains(b, []byte("seq")) {
		t.Errorf("failure %s; want the batch's partitions and offsets after 11 invocations, no record value", b)
	}
	for tp, o := range f.Partitions {
		if o.FirstOffset > o.LastOffset || tp == "" {
			t.Errorf("partition %q offsets %+v; want first <= last", tp, o)
		}
	}
}

// TestKafkaPollerRetryLimitWithDestination: an explicit MaxRetries with a
// destination is kept, as AWS keeps MaximumRetryAttempts.
func TestKafkaPollerRetryLimitWithDestination(t *testing.T) {
	rie := &fakeRIE{respond: func([]byte) (int, string) { return 200, `{"errorMessage":"down","errorType":"x"}` }}
	p, _ := kafkaFixture(t, 2, rie)
	dest := &failureRecorder{}
	p.OnFailure, p.MaxRetries = dest, 3
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.PollOnce(ctx)
	if err != nil || !res.Discarded || res.Invocations != 4 || len(dest.got) != 1 {
		t.Errorf("PollOnce = %+v, %v, %d failures sent; want discarded after 4 invocations, 1 failure sent", res, err, len(dest.got))
	}
}
