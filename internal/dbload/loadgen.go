package dbload

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/sluice-dev/sluice/internal/defaults"
)

// LoadGenerator adds CPU load to the database from outside the loop (another
// tenant, a report, a batch job): it runs the workload's aggregate over
// ScanRows rows Rate times a second, on Workers connections. It is the
// disturbance of the end-to-end run and of the real-plant lab.
type LoadGenerator struct {
	DB *sql.DB
	// Rate is the queries per second; ScanRows the rows each reads
	// (default DefaultScanRows); DataRows the size of dbload_data.
	Rate     float64
	ScanRows int
	DataRows int
	// Workers is the number of concurrent connections (default 2).
	Workers int

	mu      sync.Mutex
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	queries atomic.Int64
	errs    atomic.Int64
	lastErr atomic.Value
}

// Start starts the load; it is an error when it already runs.
func (g *LoadGenerator) Start(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cancel != nil {
		return fmt.Errorf("load generator already running")
	}
	if g.Rate <= 0 {
		return fmt.Errorf("load generator: rate %v: want > 0 queries/s", g.Rate)
	}
	scan := defaults.Positive(g.ScanRows, DefaultScanRows)
	data := defaults.Positive(g.DataRows, DefaultDataRows)
	workers := defaults.Positive(g.Workers, 2)
	ctx, g.cancel = context.WithCancel(ctx)
	lim := rate.NewLimiter(rate.Limit(g.Rate), 1)
	var next atomic.Int64
	for w := 0; w < workers; w++ {
		g.wg.Add(1)
		go func() {
			defer g.wg.Done()
			for {
				if err := lim.Wait(ctx); err != nil {
					return
				}
				i := next.Add(1)
				first := int((i * 7919) % int64(max(data-scan, 1)))
				if err := Aggregate(ctx, g.DB, first, scan); err != nil {
					if ctx.Err() != nil {
						return
					}
					g.errs.Add(1)
					g.lastErr.Store(err.Error())
					continue
				}
				g.queries.Add(1)
			}
		}()
	}
	return nil
}

// Stop stops the load and waits for the workers.
func (g *LoadGenerator) Stop() {
	g.mu.Lock()
	cancel := g.cancel
	g.cancel = nil
	g.mu.Unlock()
	if cancel != nil {
		cancel()
		g.wg.Wait()
	}
}

// Running reports whether the load runs.
func (g *LoadGenerator) Running() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.cancel != nil
}

// Queries returns the number of queries run and failed so far.
func (g *LoadGenerator) Queries() (done, failed int64) { return g.queries.Load(), g.errs.Load() }
