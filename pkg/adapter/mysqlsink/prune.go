package mysqlsink

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// PruneConfig paces a Pruner. A zero field takes its default.
type PruneConfig struct {
	// Every is the pause between rounds once no old row is left (default
	// 1 min).
	Every time.Duration
	// Behind is the pause between rounds while old rows remain (default
	// 1 s): a backlog of old rows is worked off in rounds of at most Budget
	// each, Behind apart.
	Behind time.Duration
	// Budget bounds one round: no DELETE starts after it is spent, and the
	// one running is cancelled when it ends (default 5 s).
	Budget time.Duration
	// Chunk is the most rows one DELETE removes (default 500).
	Chunk int
	// Duty is the largest share of a round's time spent in DELETEs
	// (default 0.25; 1: back to back): after a DELETE that took d, the
	// pruner rests d x (1 - Duty) / Duty before the next, so that working
	// off a backlog of old rows leaves the database to the consumers'
	// stores. At the default, one pruner removes about 500 / (4 d) rows a
	// second (d is about 35 ms on an inbox of 10 M rows).
	Duty float64
}

// The defaults of PruneConfig.
const (
	DefaultPruneEvery  = time.Minute
	DefaultPruneBehind = time.Second
	DefaultPruneBudget = 5 * time.Second
	DefaultPruneChunk  = 500
	DefaultPruneDuty   = 0.25
)

func (c PruneConfig) withDefaults() PruneConfig {
	if c.Every <= 0 {
		c.Every = DefaultPruneEvery
	}
	if c.Behind <= 0 {
		c.Behind = DefaultPruneBehind
	}
	if c.Budget <= 0 {
		c.Budget = DefaultPruneBudget
	}
	if c.Chunk <= 0 {
		c.Chunk = DefaultPruneChunk
	}
	if c.Duty <= 0 || c.Duty > 1 {
		c.Duty = DefaultPruneDuty
	}
	return c
}

// Pruner removes the inbox rows older than the sink's retention, in the
// background, on its own schedule: Store never prunes, so its latency does
// not depend on the inbox's size or on locks held on old rows. A round runs
// on a connection of its own (never one a Store holds), closed after the
// round; each DELETE is one autocommit statement, so that an environment
// frozen between Lambda invocations holds no transaction open: the
// statement the server was running commits, or gives up within the lock
// wait and rolls back. A failure is logged once (what grant or setting is
// missing) and retried the next round; it never fails a Store.
type Pruner struct {
	s      *Sink
	cfg    PruneConfig
	clock  consume.Clock
	cancel context.CancelFunc
	done   chan struct{}
	warned map[string]bool // failure kinds logged since the last good round
}

// StartPruner starts pruning the inbox in a goroutine: a round at once,
// then one every cfg.Every (cfg.Behind while old rows remain), until Stop.
// With Config.NoPrune it starts nothing and Stop returns at once.
func (s *Sink) StartPruner(cfg PruneConfig) *Pruner {
	p := &Pruner{s: s, cfg: cfg.withDefaults(), clock: consume.WallClock{}, done: make(chan struct{}), warned: map[string]bool{}}
	if s.cfg.NoInbox {
		close(p.done)
		p.cancel = func() {}
		return p
	}
	if s.cfg.NoPrune {
		s.cfg.Log.Info("inbox pruning is off: remove old rows of the inbox another way", "table", s.names.inbox, "env", EnvPrune)
		close(p.done)
		p.cancel = func() {}
		return p
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go p.run(ctx)
	return p
}

// Stop ends the pruner, cancelling the DELETE it is running (which the
// database rolls back), and returns when its goroutine has.
func (p *Pruner) Stop() {
	p.cancel()
	<-p.done
}

func (p *Pruner) run(ctx context.Context) {
	defer close(p.done)
	for {
		pause := p.cfg.Every
		if behind := p.round(ctx); behind {
			pause = p.cfg.Behind
		}
		if p.clock.Sleep(ctx, pause) != nil {
			return
		}
	}
}

// round runs DELETEs until no old row is left or the budget is spent,
// and reports whether old rows remain. A failure is logged (once per kind
// until a round succeeds) and counts as none left: the next round comes
// after Every.
func (p *Pruner) round(ctx context.Context) (behind bool) {
	rctx, cancel := context.WithTimeout(ctx, p.cfg.Budget)
	defer cancel()
	removed, done, err := p.onConn(rctx)
	switch {
	case ctx.Err() != nil:
		return false // stopped
	case err == nil, rctx.Err() != nil && removed > 0:
		clear(p.warned) // working, or the budget spent on a backlog
		return !done
	}
	if rctx.Err() != nil {
		err = fmt.Errorf("%w (%w)", err, rctx.Err())
	}
	p.warn(ctx, err)
	return false
}

// onConn prunes on a connection of its own, set up so that a DELETE
// never delays a Store: read committed (row locks on the old rows only,
// no gap lock that an insert would wait for) and a lock wait no longer
// than the budget (a DELETE cancelled here stops waiting on the server
// too). The connection is closed afterwards, never returned to the pool
// with these settings.
func (p *Pruner) onConn(ctx context.Context) (removed int64, done bool, err error) {
	conn, err := p.s.db.Conn(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("prune %s: connect: %w", p.s.names.inbox, err)
	}
	defer conn.Close()
	defer conn.Raw(func(any) error { return driver.ErrBadConn }) // discard it
	wait := max(1, int(math.Ceil(p.cfg.Budget.Seconds())))
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("SET SESSION innodb_lock_wait_timeout = %d", wait)); err != nil {
		return 0, false, fmt.Errorf("prune %s: set innodb_lock_wait_timeout: %w", p.s.names.inbox, err)
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"); err != nil {
		return 0, false, fmt.Errorf("prune %s: set the isolation level: %w", p.s.names.inbox, err)
	}
	return p.s.prune(ctx, conn, p.cfg.Chunk, -1, p)
}

// rest waits after a DELETE that took took, so that DELETEs take at most
// Duty of the round; it returns ctx's error when ctx ends first.
func (p *Pruner) rest(ctx context.Context, took time.Duration) error {
	if p.cfg.Duty >= 1 {
		return nil
	}
	return p.clock.Sleep(ctx, time.Duration(float64(took)*(1-p.cfg.Duty)/p.cfg.Duty))
}

// warn logs err once per kind, with what to change.
func (p *Pruner) warn(ctx context.Context, err error) {
	kind, hint := pruneHint(err, p.s.names.inbox, p.cfg)
	if p.warned[kind] {
		return
	}
	p.warned[kind] = true
	p.s.cfg.Log.LogAttrs(ctx, slog.LevelWarn, "prune the inbox: failed; Store is not affected, the next round tries again (logged once)",
		slog.String("table", p.s.names.inbox), slog.String("fix", hint), slog.Any("err", err))
}

// pruneHint names a pruning failure and what would fix it.
func pruneHint(err error, inbox string, cfg PruneConfig) (kind, hint string) {
	switch code(err) {
	case 1142, 1143:
		return "denied", fmt.Sprintf("the user lacks DELETE on %s: GRANT DELETE ON <database>.%s TO <user>, or set %s=off and remove old rows another way (an event of the scheduler)", inbox, inbox, EnvPrune)
	case 1205:
		return "lock", fmt.Sprintf("another transaction held old rows of %s past innodb_lock_wait_timeout", inbox)
	case 1290, 1792:
		return "read-only", "the server or the transaction is read-only (a replica?): point the DSN at the primary"
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "budget", fmt.Sprintf("a DELETE of at most %d rows did not finish within the round's budget of %v: another transaction holds old rows, or %s lacks its stored_at index (run sluice migrate)", cfg.Chunk, cfg.Budget, inbox)
	}
	return "other", "check that the database answers; the next round tries again"
}

// Prune removes inbox rows older than the retention, oldest first, in
// statements of at most 500 rows (each its own short transaction), at most
// maxChunks statements, now, on the caller's context. It returns how many
// rows it removed and whether no old row is left. A message redelivered
// after its inbox row is gone is applied again. A consumer prunes with
// StartPruner instead.
func (s *Sink) Prune(ctx context.Context, maxChunks int) (removed int64, done bool, err error) {
	return s.prune(ctx, s.db, DefaultPruneChunk, maxChunks, nil)
}

// pruneSQL deletes the oldest rows before a cutoff. The cutoff is cast:
// the driver sends a time as a string, and against a string MariaDB does
// not range-scan the stored_at index but reads all of it (every row of the
// inbox) even when none is old.
func (s *Sink) pruneSQL() string {
	return "DELETE FROM " + s.names.inbox + " WHERE stored_at < CAST(? AS DATETIME(6)) ORDER BY stored_at LIMIT ?"
}

// cutoff is the time before which inbox rows are past the retention.
func (s *Sink) cutoff() time.Time { return s.cfg.Now().Add(-s.cfg.Retention).UTC() }

// execer runs a statement: a pool or one connection of it.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// prune runs DELETEs of at most chunk rows on ex until one removes fewer,
// maxChunks of them (negative: until ctx ends). With pacer (a Pruner),
// each full DELETE is timed on its clock and followed by its rest.
func (s *Sink) prune(ctx context.Context, ex execer, chunk, maxChunks int, pacer *Pruner) (removed int64, done bool, err error) {
	cutoff := s.cutoff()
	for k := 0; maxChunks < 0 || k < maxChunks; k++ {
		if err := ctx.Err(); err != nil {
			return removed, false, fmt.Errorf("prune %s: %w", s.names.inbox, err)
		}
		var t0 time.Time
		if pacer != nil {
			t0 = pacer.clock.Now()
		}
		r, err := ex.ExecContext(ctx, s.pruneSQL(), cutoff, chunk)
		if err != nil {
			return removed, false, fmt.Errorf("prune %s: %w", s.names.inbox, err)
		}
		n, _ := r.RowsAffected()
		removed += n
		s.stats.Pruned.Add(n)
		if n < int64(chunk) {
			return removed, true, nil
		}
		if pacer != nil {
			if err := pacer.rest(ctx, pacer.clock.Now().Sub(t0)); err != nil {
				return removed, false, fmt.Errorf("prune %s: %w", s.names.inbox, err)
			}
		}
	}
	return removed, false, nil
}
