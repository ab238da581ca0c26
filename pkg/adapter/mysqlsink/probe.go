package mysqlsink

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/pkg/consume"
)

var _ consume.Prober = (*Sink)(nil)

// Probe tells whether the database is up without storing anything
// (consume.Prober): a ping, then SELECT 1 on a connection of the pool.
func (s *Sink) Probe(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("probe MySQL: ping: %w", err)
	}
	var one int
	if err := s.db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("probe MySQL: SELECT 1: %w", err)
	}
	return nil
}
