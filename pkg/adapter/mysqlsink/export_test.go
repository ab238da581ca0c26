package mysqlsink

import (
	"context"
	"database/sql"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// PruneRound runs one round of p, as its goroutine does.
func PruneRound(ctx context.Context, p *Pruner) (behind bool) { return p.round(ctx) }

// NewPruner is a Pruner of s that runs only when told (PruneRound).
func NewPruner(s *Sink, cfg PruneConfig) *Pruner {
	return &Pruner{s: s, cfg: cfg.withDefaults(), clock: consume.WallClock{}, warned: map[string]bool{}}
}

// PruneOn runs one prune DELETE of at most chunk rows on conn.
func PruneOn(ctx context.Context, s *Sink, conn *sql.Conn, chunk int) (int64, error) {
	n, _, err := s.prune(ctx, conn, chunk, 1, nil)
	return n, err
}

// SetPruneClock sets the clock p times its DELETEs and rests on.
func SetPruneClock(p *Pruner, c consume.Clock) { p.clock = c }
