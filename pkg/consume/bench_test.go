package consume_test

import (
	"context"
	"math"
	"testing"

	"github.com/sluice-dev/sluice/internal/unpaced"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

type nullSink struct{}

func (nullSink) Store(_ context.Context, m []consume.Message) ([]consume.Result, error) {
	return make([]consume.Result, len(m)), nil
}

// BenchmarkProcess compares one batch of 10 paced at an unlimited rate with
// the same batch unpaced: the cost of pacing per batch.
func BenchmarkProcess(b *testing.B) {
	batch := make([]consume.Message, 10)
	for i := range batch {
		batch[i] = consume.Message{ID: "m", Body: []byte(`{"seq":1}`)}
	}
	for _, off := range []bool{false, true} {
		name := "paced-unlimited"
		if off {
			name = "unpaced"
		}
		b.Run(name, func(b *testing.B) {
			rates := memqueue.NewRates()
			rates.Put(protocol.Rate{Loop: "l", PerSecond: math.Inf(1)})
			rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l"}, rates, nil, consume.WallClock{}, nil, nil)
			c := consume.New(consume.Config{}, rc, nullSink{}, consume.WallClock{}, nil, nil)
			ctx := context.Background()
			if off {
				ctx = unpaced.Context(ctx)
			}
			b.ReportAllocs()
			for b.Loop() {
				c.Process(ctx, batch)
			}
		})
	}
}
