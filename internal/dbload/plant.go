package dbload

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// Plant is the real plant of the lab: consumers that store messages in the
// database's messages table (through mysqlsink, the production sink, so
// the workload trigger runs for each) at an allowed rate, from an endless
// backlog. Every message taken is counted, and so is every message the
// database confirmed, so that a loss shows up: a batch whose insert fails is
// retried until it is stored.
type Plant struct {
	DB *sql.DB
	// Prefix starts every message id of this plant (one run).
	Prefix string
	// Workers is the number of concurrent consumers (default 4), BatchSize
	// the messages per insert (default 10, an SQS batch).
	Workers, BatchSize int

	lim      *rate.Limiter
	allowed  atomic.Uint64 // float64 bits
	next     atomic.Int64
	taken    atomic.Int64
	stored   atomic.Int64
	failures atomic.Int64
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// minRate keeps the limiter moving: below it, the plant is paused.
const minRate = 0.01

// Start starts the consumers at rate u (messages/s).
func (p *Plant) Start(ctx context.Context, u float64) error {
	if p.DB == nil || p.Prefix == "" {
		return fmt.Errorf("dbload plant: DB and Prefix must be set")
	}
	if p.cancel != nil {
		return fmt.Errorf("dbload plant: already started")
	}
	workers := defaults.Positive(p.Workers, 4)
	batch := defaults.Positive(p.BatchSize, 10)
	p.lim = rate.NewLimiter(rate.Limit(math.Max(u, minRate)), batch)
	p.SetRate(u)
	ctx, p.cancel = context.WithCancel(ctx)
	sink := mysqlsink.New(p.DB)
	for range workers {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.consume(ctx, sink, batch)
		}()
	}
	return nil
}

func (p *Plant) consume(ctx context.Context, sink *mysqlsink.Sink, batch int) {
	for {
		if p.Rate() < minRate {
			if (consume.WallClock{}).Sleep(ctx, 100*time.Millisecond) != nil {
				return
			}
			continue
		}
		if err := p.lim.WaitN(ctx, batch); err != nil {
			return
		}
		msgs := make([]consume.Message, batch)
		for i := range msgs {
			n := p.next.Add(1) - 1
			msgs[i] = consume.Message{ID: fmt.Sprintf("%s-%d", p.Prefix, n), Body: fmt.Appendf(nil, `{"seq":%d}`, n)}
		}
		p.taken.Add(int64(batch))
		// A taken batch is stored even when the run is ending: nothing
		// taken may be lost.
		sctx := context.WithoutCancel(ctx)
		for attempt := 0; ; attempt++ {
			res, err := sink.Store(sctx, msgs)
			if err == nil {
				p.stored.Add(int64(consume.CountStored(res)))
				break
			}
			p.failures.Add(1)
			time.Sleep(min(time.Duration(attempt+1)*100*time.Millisecond, 2*time.Second))
		}
	}
}

// SetRate sets the allowed rate, messages/s.
func (p *Plant) SetRate(u float64) {
	if math.IsNaN(u) || u < 0 {
		u = 0
	}
	p.allowed.Store(math.Float64bits(u))
	if p.lim != nil {
		p.lim.SetLimit(rate.Limit(math.Max(u, minRate)))
	}
}

// Rate returns the allowed rate.
func (p *Plant) Rate() float64 { return math.Float64frombits(p.allowed.Load()) }

// Stop stops the consumers after their batch in progress is stored.
func (p *Plant) Stop() {
	if p.cancel != nil {
		p.cancel()
		p.wg.Wait()
		p.cancel = nil
	}
}

// Counts returns the messages taken from the backlog, the messages the
// database confirmed, and the failed store attempts (retried).
func (p *Plant) Counts() (taken, stored, failures int64) {
	return p.taken.Load(), p.stored.Load(), p.failures.Load()
}

// CountStored counts this plant's rows in the messages table: what the
// database holds, independently of the plant's own counters.
func (p *Plant) CountStored(ctx context.Context) (rows, distinct int64, err error) {
	err = p.DB.QueryRowContext(ctx, "SELECT COUNT(*), COUNT(DISTINCT id) FROM messages WHERE id LIKE CONCAT(?, '-%')", p.Prefix).Scan(&rows, &distinct)
	if err != nil {
		return 0, 0, fmt.Errorf("count stored messages: %w", err)
	}
	return rows, distinct, nil
}
