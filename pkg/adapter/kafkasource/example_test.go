package kafkasource_test

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// A worker receives records, stores them, and acknowledges what was stored:
// the group's commit stops before the first record not stored.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("orders"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer producer.Close()
	producer.ProduceSync(ctx,
		&kgo.Record{Value: []byte(`{"order":1}`), Headers: []kgo.RecordHeader{{Key: "message-id", Value: []byte("order-1")}}},
		&kgo.Record{Value: []byte(`{"order":2}`)},
		&kgo.Record{Value: []byte(`{"order":3}`)},
	)

	src, err := kafkasource.New(kafkasource.Config{Brokers: cluster.ListenAddrs(), Topics: []string{"orders"}, Group: "workers"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer src.Close(ctx)
	var msgs []consume.Message
	for len(msgs) < 3 {
		got, err := src.Receive(ctx, 3-len(msgs))
		if err != nil {
			fmt.Println(err)
			return
		}
		msgs = append(msgs, got...)
	}
	for _, m := range msgs {
		fmt.Println(m.ID)
	}
	// The sink stored the first and the third; the second is released.
	if err := src.Ack(ctx, []consume.Message{msgs[0], msgs[2]}); err != nil {
		fmt.Println(err)
	}
	if err := src.Release(ctx, msgs[1:2]); err != nil {
		fmt.Println(err)
	}
	fmt.Println("committed:", src.Committed())
	// Output:
	// order-1
	// orders/0/1
	// orders/0/2
	// committed: map[orders:map[0:1]]
}
