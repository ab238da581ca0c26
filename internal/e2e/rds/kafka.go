package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
)

// kafkaPath is the Kafka side: a topic, its dead-letter topic, the worker.
type kafkaPath struct {
	brokers []string
	topic   string
	cl      *kgo.Client
	adm     *kadm.Client
	worker  *consumers.Worker
}

// produce creates the topics and sends n records, seq from first, each
// with its message-id header.
func (k *kafkaPath) produce(ctx context.Context, first, n int) error {
	var err error
	if k.cl, err = kgo.NewClient(kgo.SeedBrokers(k.brokers...), kgo.DefaultProduceTopic(k.topic)); err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	k.adm = kadm.NewClient(k.cl)
	for _, t := range []string{k.topic, k.topic + ".dlt"} {
		if _, err := k.adm.CreateTopic(ctx, 2, 1, nil, t); err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	recs := make([]*kgo.Record, 0, n)
	for i := first; i < first+n; i++ {
		recs = append(recs, &kgo.Record{Value: []byte(consumers.Body(i, false)),
			Headers: []kgo.RecordHeader{{Key: "message-id", Value: []byte(k.topic + "-" + strconv.Itoa(i))}}})
	}
	if err := k.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("produce to %s: %w", k.topic, err)
	}
	return nil
}

// deadLettered counts the records of the dead-letter topic.
func (k *kafkaPath) deadLettered(ctx context.Context) (int, error) {
	ends, err := k.adm.ListEndOffsets(ctx, k.topic+".dlt")
	if err != nil {
		return 0, fmt.Errorf("dead-letter topic offsets: %w", err)
	}
	n := 0
	ends.Each(func(o kadm.ListedOffset) { n += int(o.Offset) })
	return n, nil
}

// Close deletes the topics.
func (k *kafkaPath) Close() {
	if k.adm != nil {
		k.adm.DeleteTopics(context.Background(), k.topic, k.topic+".dlt")
	}
	if k.cl != nil {
		k.cl.Close()
	}
}
