package kafkasource_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// The dead-letter topic refusing as a real broker does (SLUICE_KAFKA_BROKERS):
// a record too large for its max.message.bytes (MESSAGE_TOO_LARGE, which
// franz-go does not retry), and a topic that does not exist yet
// (UNKNOWN_TOPIC_OR_PARTITION after franz-go's 4 tries). A retriable
// refusal lasting seconds (NOT_ENOUGH_REPLICAS) cannot be made on this
// single Kafka 4 broker (min.insync.replicas above the replication factor
// is not enforced there: measured, the produce succeeds), so it is
// injected with kfake in dlqretriable_test.go.

// dltMaxBytes is the max.message.bytes of the small dead-letter topics.
const dltMaxBytes = 4096

// createTopicConfig creates topic with one replica and the given configs.
func createTopicConfig(t *testing.T, brokers []string, topic string, partitions int32, configs map[string]string) {
	t.Helper()
	cfg := map[string]*string{}
	for k, v := range configs {
		cfg[k] = &v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := kadm.NewClient(client(t, brokers)).CreateTopic(ctx, partitions, 1, cfg, topic); err != nil {
		t.Fatalf("create topic %s %v: %v", topic, configs, err)
	}
}

// setTopicConfig sets one config of topic.
func setTopicConfig(t *testing.T, cl *kgo.Client, topic, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: key, Value: &value}}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = rs.On(topic, nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Errorf("set %s=%s on %s: %v", key, value, topic, err)
	}
}

// noise is a malformed body of size bytes that does not compress (the
// broker checks max.message.bytes on the compressed batch).
func noise(size int) string {
	b := make([]byte, size)
	_, _ = rand.Read(b)
	return ("not json " + base64.StdEncoding.EncodeToString(b))[:size]
}

// bigPoison writes a poison record with a body of size bytes at offset 0
// of topic, then n healthy ones; it returns the healthy ids.
func bigPoison(t *testing.T, brokers []string, topic string, size, n int) []string {
	t.Helper()
	body := noise(size)
	cl := client(t, brokers, kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rec := &kgo.Record{Value: []byte(body), Headers: []kgo.RecordHeader{{Key: "message-id", Value: []byte("big")}}}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Fatalf("produce the poison: %v", err)
	}
	return produce(t, brokers, topic, "h", 1, n, nil)
}

// drive runs src in the background as the consumer settles it, with "big"
// as the poison and every other record stored, until stop is called; stop
// waits for it to end (again: nothing), and received, what it received by
// id, is read after stop.
func drive(t *testing.T, src *kafkasource.Source) (received map[string]int, stop func()) {
	received = map[string]int{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); settle(ctx, t, src, received) }()
	return received, func() { cancel(); <-done }
}

// settle is drive's loop, until ctx ends.
func settle(ctx context.Context, t *testing.T, src *kafkasource.Source, received map[string]int) {
	for ctx.Err() == nil {
		msgs, err := src.Receive(ctx, 10)
		if err != nil && ctx.Err() == nil {
			t.Logf("Receive: %v", err)
		}
		var healthy []consume.Message
		for _, m := range msgs {
			received[m.ID]++
			if m.ID == "big" {
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
				_ = src.DeadLetter(dctx, []consume.Poison{{Message: m, Reason: "malformed payload"}})
				cancel()
				continue
			}
			healthy = append(healthy, m)
		}
		if err := src.Ack(context.WithoutCancel(ctx), healthy); err != nil {
			t.Errorf("Ack: %v", err)
		}
	}
}

// deadHeaders returns the headers of the one record of a dead-letter topic.
func deadHeaders(t *testing.T, brokers []string, topic string) (map[string]string, *kgo.Record) {
	t.Helper()
	recs := readAll(t, brokers, topic)
	if len(recs) != 1 {
		t.Fatalf("%s holds %d records; want the poison once", topic, len(recs))
	}
	h := map[string]string{}
	for _, kv := range recs[0].Headers {
		h[kv.Key] = string(kv.Value)
	}
	return h, recs[0]
}

// TestBrokerDeadLetterTooLarge: a poison record whose dead letter is too
// large for the dead-letter topic (its max.message.bytes) can never be
// taken as it is. It is dead-lettered cut (its value shortened to
// kafkasource.TruncatedValueBytes, the header sluice-dlt-truncated
// telling the original size) with its reason, counted, and the partition
// is committed past it: not held for ever behind a refusal that cannot
// succeed.
func TestBrokerDeadLetterTooLarge(t *testing.T) {
	brokers, topic, group := brokerRun(t, "dlt-large")
	createTopic(t, brokers, topic, 1)
	createTopicConfig(t, brokers, topic+".dlt", 1, map[string]string{"max.message.bytes": fmt.Sprint(dltMaxBytes)})
	const n, size = 30, 3 * dltMaxBytes
	healthy := bigPoison(t, brokers, topic, size, n)
	src, err := kafkasource.New(kafkasource.Config{Brokers: brokers, Topics: []string{topic}, Group: group, Opts: fastGroup,
		CommitInterval: -1, RetryBackoff: consume.Backoff{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond}, Log: testLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close(context.Background()) })
	received, stop := drive(t, src)
	deadline := time.Now().Add(20 * time.Second)
	for committed(t, brokers, group, topic)[0] != n+1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	if got := committed(t, brokers, group, topic)[0]; got != n+1 {
		t.Fatalf("committed offset %d, DeadLetterRefused %d: the poison whose dead letter is too large holds the partition; want %d",
			got, src.Stats().DeadLetterRefused.Load(), n+1)
	}
	h, rec := deadHeaders(t, brokers, topic+".dlt")
	if h[kafkasource.HeaderReason] != "malformed payload" || h[kafkasource.HeaderID] != "big" {
		t.Errorf("dead letter headers %v; want its reason and id", h)
	}
	if want := fmt.Sprintf("value cut from %d to %d bytes", size, kafkasource.TruncatedValueBytes); h[kafkasource.HeaderTruncated] != want {
		t.Errorf("header %s = %q; want %q", kafkasource.HeaderTruncated, h[kafkasource.HeaderTruncated], want)
	}
	if len(rec.Value) != kafkasource.TruncatedValueBytes || !strings.HasPrefix(string(rec.Value), "not json ") {
		t.Errorf("dead letter value of %d bytes %.12q...; want the first %d bytes of the poison", len(rec.Value), rec.Value, kafkasource.TruncatedValueBytes)
	}
	if got := src.Stats().DeadLetterTruncated.Load(); got != 1 {
		t.Errorf("Stats().DeadLetterTruncated = %d; want the one cut dead letter counted", got)
	}
	if m := missing(healthy, func(id string) bool { return received[id] > 0 }); len(m) > 0 {
		t.Errorf("%d healthy records never received, e.g. %v", len(m), m[0])
	}
}

// bigEvent is a Lambda Kafka event of one partition of topic: a poison
// record with a body of size bytes, then a healthy one.
func bigEvent(topic string, size int) events.KafkaEvent {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	now := events.MilliSecondsEpochTime{Time: time.Now().Truncate(time.Millisecond)}
	return events.KafkaEvent{EventSource: "SelfManagedKafka", BootstrapServers: "local", Records: map[string][]events.KafkaRecord{
		topic + "-0": {
			{Topic: topic, Partition: 0, Offset: 0, Timestamp: now, Value: b64(noise(size))},
			{Topic: topic, Partition: 0, Offset: 1, Timestamp: now, Value: b64(`{"seq":1}`)},
		},
	}}
}

// TestBrokerLambdaDeadLetterTooLarge: on the Kafka Lambda, a poison record
// whose dead letter is too large for the dead-letter topic is sent cut
// (as on the worker) and the invocation succeeds, instead of failing
// every retry of the batch until the mapping skips it (and the poison with
// it) or, without a retry limit, holding the partition for ever.
func TestBrokerLambdaDeadLetterTooLarge(t *testing.T) {
	brokers, topic, _ := brokerRun(t, "lambda-dlt-large")
	createTopicConfig(t, brokers, topic+".dlt", 1, map[string]string{"max.message.bytes": fmt.Sprint(dltMaxBytes)})
	const size = 3 * dltMaxBytes
	sink := memqueue.NewSink()
	h := lambdaHandler(1000, sink, kafkasource.TopicDeadLetters{Client: client(t, brokers)})
	h.HoldPoll, h.PacingMargin = 100*time.Millisecond, time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Handle(ctx, bigEvent(topic, size)); err != nil {
		t.Fatalf("Handle = %v; want nil (the dead letter sent cut)", err)
	}
	hs, rec := deadHeaders(t, brokers, topic+".dlt")
	if want := fmt.Sprintf("value cut from %d to %d bytes", size, kafkasource.TruncatedValueBytes); hs[kafkasource.HeaderTruncated] != want {
		t.Errorf("header %s = %q; want %q", kafkasource.HeaderTruncated, hs[kafkasource.HeaderTruncated], want)
	}
	if !strings.HasPrefix(hs[kafkasource.HeaderReason], "malformed payload") || len(rec.Value) != kafkasource.TruncatedValueBytes {
		t.Errorf("dead letter reason %q, value %d bytes; want the reason and %d bytes", hs[kafkasource.HeaderReason], len(rec.Value), kafkasource.TruncatedValueBytes)
	}
	if sink.Len() != 1 {
		t.Errorf("sink holds %d records; want the healthy one", sink.Len())
	}
}

// TestBrokerLambdaDeadLetterTopicCreatedLate: on the Kafka Lambda, a
// dead-letter topic that does not exist yet (a client without
// auto-creation: franz-go fails the produce with UNKNOWN_TOPIC_OR_PARTITION
// after 4 metadata loads, about 1 s here) and is created a few seconds
// into the invocation costs no retry of the batch: the handler counts the
// refusals and sends again within the invocation.
func TestBrokerLambdaDeadLetterTopicCreatedLate(t *testing.T) {
	brokers, topic, _ := brokerRun(t, "lambda-dlt-late")
	sink := memqueue.NewSink()
	h := lambdaHandler(1000, sink, kafkasource.TopicDeadLetters{Client: client(t, brokers)})
	h.HoldPoll, h.PacingMargin = 100*time.Millisecond, time.Second
	var emf bytes.Buffer
	h.Metrics = &emf
	created := make(chan struct{})
	defer func() { <-created }()
	go func() {
		defer close(created)
		time.Sleep(2 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := kadm.NewClient(client(t, brokers)).CreateTopic(ctx, 1, 1, nil, topic+".dlt"); err != nil {
			t.Errorf("create %s.dlt: %v", topic, err)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.Handle(ctx, bigEvent(topic, 100)); err != nil {
		t.Fatalf("Handle = %v; want nil (dead-lettered once the topic exists)", err)
	}
	if hs, _ := deadHeaders(t, brokers, topic+".dlt"); !strings.HasPrefix(hs[kafkasource.HeaderReason], "malformed payload") {
		t.Errorf("dead letter reason %q; want the poison's", hs[kafkasource.HeaderReason])
	}
	if got := refusedInEMF(t, emf.Bytes()); got == 0 {
		t.Errorf("EMF DeadLetterRefused = 0; want the refusals before the topic existed counted")
	}
}
