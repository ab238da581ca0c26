package consumetest

import (
	"context"
	"sync/atomic"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// CountingSink wraps a Sink and counts the messages it stored (results with
// the outcome Stored), for tests and benchmarks that measure what consumers
// took. It is safe for concurrent use.
type CountingSink struct {
	consume.Sink
	stored atomic.Int64
}

// Store stores through the wrapped sink and counts what it stored.
func (s *CountingSink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	res, err := s.Sink.Store(ctx, msgs)
	if err == nil {
		s.stored.Add(int64(consume.CountStored(res)))
	}
	return res, err
}

// Stored is how many messages the wrapped sink stored so far.
func (s *CountingSink) Stored() int64 { return s.stored.Load() }
