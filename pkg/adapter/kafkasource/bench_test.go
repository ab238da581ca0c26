package kafkasource_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
)

// BenchmarkReceiveAck measures one member's Receive + Ack (a synchronous
// commit per batch) on kfake, per message, for two batch sizes.
func BenchmarkReceiveAck(b *testing.B) {
	for _, batch := range []int{10, 50} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			c := newFake(b, "bench", 1)
			brokers := c.ListenAddrs()
			produce(b, brokers, "bench", "b", 0, b.N, nil)
			src, err := kafkasource.New(kafkasource.Config{Brokers: brokers, Topics: []string{"bench"}, Group: "g", Opts: fastGroup})
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close(context.Background())
			ctx := context.Background()
			b.ResetTimer()
			for got := 0; got < b.N; {
				ms, err := src.Receive(ctx, min(batch, b.N-got))
				if err != nil {
					b.Fatal(err)
				}
				if err := src.Ack(ctx, ms); err != nil {
					b.Fatal(err)
				}
				got += len(ms)
			}
		})
	}
}
