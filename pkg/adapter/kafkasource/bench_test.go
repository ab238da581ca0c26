package kafkasource_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
)

// BenchmarkReceiveAck measures one member's Receive + Ack, per message, for
// two batch sizes, committing in every Ack (interval -1) or once a second: on kfake, and on
// the real broker too when SLUICE_KAFKA_BROKERS is set.
func BenchmarkReceiveAck(b *testing.B) {
	type target struct {
		name    string
		brokers func(b *testing.B, topic string) []string
	}
	targets := []target{{"kfake", func(b *testing.B, topic string) []string { return newFake(b, topic, 1).ListenAddrs() }}}
	if env := os.Getenv("SLUICE_KAFKA_BROKERS"); env != "" {
		targets = append(targets, target{"broker", func(b *testing.B, topic string) []string {
			brokers := strings.Split(env, ",")
			createTopic(b, brokers, topic, 1)
			return brokers
		}})
	}
	for _, tg := range targets {
		for _, run := range []struct {
			batch    int
			interval time.Duration
		}{{10, -1}, {50, -1}, {10, time.Second}, {50, time.Second}} {
			batch := run.batch
			b.Run(fmt.Sprintf("%s/batch=%d/commit_interval=%v", tg.name, batch, run.interval), func(b *testing.B) {
				topic := fmt.Sprintf("sluice-bench-%d", time.Now().UnixNano())
				brokers := tg.brokers(b, topic)
				produce(b, brokers, topic, "b", 0, b.N, nil)
				src, err := kafkasource.New(kafkasource.Config{Brokers: brokers, Topics: []string{topic}, Group: topic, Opts: fastGroup, CommitInterval: run.interval})
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
}
