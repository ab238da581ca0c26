// Package mysqlsink applies consumed messages to MySQL or MariaDB
// (go-sql-driver/mysql), exactly once, in one transaction per batch.
//
// Each message runs the statement the user configured (Config.Statement,
// for example an upsert into the application's orders table), with named
// placeholders bound as parameters, never spliced into the SQL: :id,
// :body, :json.PATH and :attr.NAME. In the same transaction the message's
// id and body hash go into the inbox table (<prefix>sluice_inbox): a
// redelivered message (same id, same body) changes nothing, even when the
// statement is not idempotent; the same id with another body is an id
// collision, poison. Without a statement the sink inserts id and body into
// its own <prefix>messages table, with the same inbox. Inbox rows past the
// retention are removed by a Pruner (Sink.StartPruner) in the background,
// never by Store.
//
// A message the database refuses for its content (data too long, out of
// range, a constraint violation) is poison with the database's reason and
// the rest of the batch still commits; a deadlock is retried here; any
// other failure (connection, lock wait timeout, read-only) is returned as
// an error: nothing of the batch is stored, all of it is retried.
package mysqlsink

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/pkg/consume"
)

var _ consume.Sink = (*Sink)(nil)

// maxIDBytes is the longest message id the inbox keeps.
const maxIDBytes = 512

// maxDeadlockRetries bounds how often one Store retries a transaction that
// the database chose as a deadlock victim.
const maxDeadlockRetries = 5

// maxInboxConflicts bounds how often one Store restarts because another
// consumer stored one of its ids at the same time (an SQS redelivery
// handled twice at once).
const maxInboxConflicts = 3

// Sink applies messages to MySQL with an inbox.
type Sink struct {
	db    *sql.DB
	cfg   Config
	names names
	stmts []statement
	// rows is the statement as a multi-row INSERT when it has that form:
	// one statement per batch, message by message only to find a row the
	// database refuses.
	rows *rows

	mu       sync.Mutex
	prepared []*sql.Stmt
	cache    map[string]*sql.Stmt // multi-row statements by text

	stats Stats
}

// Stats counts what a Sink did beyond storing messages.
type Stats struct {
	// Duplicates are redelivered messages (same id, same body) that changed
	// nothing.
	Duplicates atomic.Int64
	// Collisions are messages whose id was stored before with another body
	// (poison).
	Collisions atomic.Int64
	// Refused are messages the database refused for their content, or that
	// could not be bound to the statement (poison).
	Refused atomic.Int64
	// Deadlocks are transactions retried after the database chose them as a
	// deadlock victim.
	Deadlocks atomic.Int64
	// Pruned are inbox rows removed after the retention.
	Pruned atomic.Int64
}

// New returns a Sink on db with the default table and no prefix (today's
// behaviour, plus the inbox). Call Migrate first.
func New(db *sql.DB) *Sink {
	s, err := newSink(db, Config{})
	if err != nil {
		panic(err) // the default configuration is valid
	}
	return s
}

// Prepare returns a Sink on db configured by cfg, after checking its
// statement against the database: every statement must parse, name only
// known placeholders and prepare, and the inbox must exist. A statement
// that cannot work, or a missing inbox, returns an error wrapping
// ErrStatement with the database's reason. Call MigratePrefix(ctx, db,
// cfg.Prefix) first (or run `sluice migrate`).
func Prepare(ctx context.Context, db *sql.DB, cfg Config) (*Sink, error) {
	s, err := newSink(db, cfg)
	if err != nil {
		return nil, err
	}
	if _, err := s.prepare(ctx); err != nil {
		return nil, err
	}
	if cfg.NoInbox {
		s.cfg.Log.WarnContext(ctx, "MySQL inbox off: exactly-once rests on the statement", "env", EnvInbox, "given_up", InboxOffGivesUp,
			"idempotent", map[bool]string{true: "asserted by the operator", false: "an upsert by its form"}[cfg.Idempotent])
		return s, nil
	}
	if err := s.warm(ctx, 1, false); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) {
			return nil, fmt.Errorf("%w: the inbox %s is not usable (create it with sluice migrate --prefix %q): %w", ErrStatement, s.names.inbox, cfg.Prefix, err)
		}
		return nil, err
	}
	return s, nil
}

// Start applies the migrations for cfg.Prefix and returns the sink
// configured by cfg, its statement checked against the database (see
// Prepare): what a consumer does at start.
func Start(ctx context.Context, db *sql.DB, cfg Config) (*Sink, error) {
	if err := MigratePrefix(ctx, db, cfg.Prefix); err != nil {
		return nil, err
	}
	return Prepare(ctx, db, cfg)
}

func newSink(db *sql.DB, cfg Config) (*Sink, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Sink{db: db, cfg: cfg, names: namesFor(cfg.Prefix), cache: map[string]*sql.Stmt{}}
	text := cfg.Statement
	if strings.TrimSpace(text) == "" {
		text = defaultStatement(s.names)
	}
	if s.stmts, err = parseStatements(text); err != nil {
		return nil, err
	}
	if err := checkNoInbox(cfg, s.stmts); err != nil {
		return nil, err
	}
	if len(s.stmts) == 1 {
		if r, ok := multiRow(s.stmts[0]); ok {
			s.rows = &r
		}
	}
	return s, nil
}

// defaultStatement stores id and body in the default table, an upsert.
func defaultStatement(n names) string {
	return "INSERT INTO " + n.messages + " (id, body) VALUES (:id, :body) ON DUPLICATE KEY UPDATE id = id"
}

// Stats returns the sink's counters.
func (s *Sink) Stats() *Stats { return &s.stats }

// Close releases the prepared statements (not the database).
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, p := range s.prepared {
		errs = append(errs, p.Close())
	}
	for _, p := range s.cache {
		errs = append(errs, p.Close())
	}
	s.prepared, s.cache = nil, map[string]*sql.Stmt{}
	return errors.Join(errs...)
}

// prepare prepares the statements once on db; database/sql prepares them
// again on each connection when first used there.
func (s *Sink) prepare(ctx context.Context) ([]*sql.Stmt, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prepared != nil {
		return s.prepared, nil
	}
	ps := make([]*sql.Stmt, 0, len(s.stmts))
	for i, st := range s.stmts {
		p, err := s.db.PrepareContext(ctx, st.sql)
		if err != nil {
			for _, q := range ps {
				q.Close()
			}
			return nil, prepareError(i, len(s.stmts), st, err)
		}
		ps = append(ps, p)
	}
	s.prepared = ps
	return ps, nil
}

// prepareError wraps ErrStatement when the database refused the statement
// itself (not when it could not be reached).
func prepareError(i, n int, st statement, err error) error {
	which := "statement"
	if n > 1 {
		which = fmt.Sprintf("statement %d of %d", i+1, n)
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return fmt.Errorf("%w: %s does not prepare (%s): %w", ErrStatement, which, st.sql, err)
	}
	return fmt.Errorf("prepare %s: %w", which, err)
}

// item is a message ready to store: its inbox key and hash and the
// parameters of each statement.
type item struct {
	i int // index in the batch
	n int // the message's delivery (ReceiveCount)
	// first is the message's first delivery (zero: unknown).
	first time.Time
	id    string
	hash  [sha256.Size]byte
	args  [][]any
}

// Store applies msgs in one transaction and returns one result per
// message: stored (also a duplicate, which changes nothing), or permanent
// with the reason (an id collision, a missing JSON path or attribute, a row
// the database refuses for its content). The transaction is retried
// without the refused messages, and after a deadlock. Any other failure is
// returned as an error and nothing of msgs is stored.
func (s *Sink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	res := make([]consume.Result, len(msgs))
	items, twins := s.bind(msgs, res)
	if err := s.store(ctx, items, res); err != nil {
		return nil, fmt.Errorf("store %d messages in MySQL: %w", len(msgs), err)
	}
	for dup, first := range twins {
		res[dup] = res[first]
	}
	return res, nil
}

// bind hashes the messages and binds their parameters. A message that
// cannot be bound is marked poison in res; a message whose id repeats in
// the batch is a twin of the first (it shares its fate) when the bodies are
// the same, else an id collision.
func (s *Sink) bind(msgs []consume.Message, res []consume.Result) ([]item, map[int]int) {
	items := make([]item, 0, len(msgs))
	first := make(map[string]int, len(msgs)) // id -> index in items
	twins := map[int]int{}
	for i, m := range msgs {
		h := sha256.Sum256(m.Body)
		if k, ok := first[m.ID]; ok {
			if items[k].hash == h {
				twins[i] = items[k].i
			} else {
				res[i] = s.collision(m.ID, items[k].hash, h)
			}
			continue
		}
		if len(m.ID) > maxIDBytes {
			res[i] = s.refused(fmt.Sprintf("message id of %d bytes: the inbox keeps at most %d", len(m.ID), maxIDBytes))
			continue
		}
		args, err := s.args(m)
		if err != nil {
			res[i] = s.refused(fmt.Sprintf("cannot bind the statement's parameters: %v", err))
			continue
		}
		first[m.ID] = len(items)
		items = append(items, item{i: i, n: m.ReceiveCount, first: m.FirstReceivedAt, id: m.ID, hash: h, args: args})
	}
	return items, twins
}

func (s *Sink) args(m consume.Message) ([][]any, error) {
	doc := &body{raw: m.Body}
	out := make([][]any, len(s.stmts))
	for j, st := range s.stmts {
		a, err := st.bind(m, doc)
		if err != nil {
			return nil, err
		}
		out[j] = a
	}
	return out, nil
}

func (s *Sink) refused(reason string) consume.Result {
	s.stats.Refused.Add(1)
	return consume.Result{Outcome: consume.Permanent, Reason: reason}
}

// refusal is the result of an item the database refused: poison, except a
// missing parent row (the parent may come later) before the item's
// OrderingAttempts-th delivery, which is retryable.
func (s *Sink) refusal(it item, ref *refusedError) consume.Result {
	if !isOrderingError(ref.err) {
		return s.refused("MySQL refused the message: " + ref.Error())
	}
	// The parent may still come before the OrderingAttempts-th delivery
	// or, when the first delivery's time is known, within OrderingWait.
	waiting := it.n < s.cfg.OrderingAttempts
	var waited time.Duration
	if !it.first.IsZero() {
		waited = s.cfg.Now().Sub(it.first)
		waiting = waiting || waited < s.cfg.OrderingWait
	}
	if it.n > 0 && waiting {
		return consume.Result{Outcome: consume.Retryable, Waiting: true, Reason: fmt.Sprintf(
			"MySQL refused the message for a missing parent row, which may not be stored yet (delivery %d, waited %v; poison from delivery %d once it has waited %v): %s",
			it.n, waited.Round(time.Second), s.cfg.OrderingAttempts, s.cfg.OrderingWait, ref.Error())}
	}
	return s.refused(fmt.Sprintf("MySQL refused the message for a missing parent row on delivery %d: %s", it.n, ref.Error()))
}

func (s *Sink) collision(id string, was, now [sha256.Size]byte) consume.Result {
	s.stats.Collisions.Add(1)
	return consume.Result{Outcome: consume.Permanent, Reason: fmt.Sprintf(
		"id collision: message id %q was stored with another body (sha256 %x, this body %x)", id, was[:8], now[:8])}
}

// store runs transactions until items are stored: without the messages the
// database refused, without those the inbox knows, again after a deadlock.
func (s *Sink) store(ctx context.Context, items []item, res []consume.Result) error {
	if len(items) == 0 {
		return nil
	}
	stmts, err := s.prepare(ctx)
	if err != nil {
		return err
	}
	multi := s.rows != nil
	deadlocks, conflicts := 0, 0
	for len(items) > 0 {
		err := s.transaction(ctx, stmts, items, multi)
		var ref *refusedError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ref) && ref.at < 0:
			multi = false // find the refused row: one statement per message
		case errors.As(err, &ref):
			res[items[ref.at].i] = s.refusal(items[ref.at], ref)
			items = slices.Delete(items, ref.at, ref.at+1)
		case errors.Is(err, errInboxConflict) && conflicts < maxInboxConflicts:
			conflicts++
			if items, err = s.settleKnown(ctx, items, res); err != nil {
				return err
			}
		case isDeadlock(err) && deadlocks < maxDeadlockRetries:
			deadlocks++
			s.stats.Deadlocks.Add(1)
			s.cfg.Log.WarnContext(ctx, "MySQL deadlock; retrying the batch", "messages", len(items), "retry", deadlocks, "err", err)
			if err := (consume.WallClock{}).Sleep(ctx, time.Duration(deadlocks)*(5*time.Millisecond+rand.N(20*time.Millisecond))); err != nil {
				return err
			}
		default:
			return err
		}
	}
	return nil
}

// transaction writes the inbox rows of items and applies their statements,
// in one transaction.
func (s *Sink) transaction(ctx context.Context, stmts []*sql.Stmt, items []item, multi bool) error {
	if err := s.warm(ctx, len(items), multi); err != nil {
		return err
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() // after Commit: sql.ErrTxDone, ignored
	if !s.cfg.NoInbox {
		if err := s.insertInbox(ctx, tx, items); err != nil {
			return err
		}
	}
	if multi {
		err = s.applyRows(ctx, tx, items)
	} else {
		err = s.apply(ctx, tx, stmts, items)
	}
	if err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// apply runs every statement for every message, in order.
func (s *Sink) apply(ctx context.Context, tx *sql.Tx, stmts []*sql.Stmt, items []item) error {
	txs := make([]*sql.Stmt, len(stmts))
	for j, p := range stmts {
		txs[j] = tx.StmtContext(ctx, p)
	}
	for k, it := range items {
		for j, st := range txs {
			if _, err := st.ExecContext(ctx, it.args[j]...); err != nil {
				if isContentError(err) {
					return &refusedError{at: k, stmt: j, stmts: len(txs), err: err}
				}
				return fmt.Errorf("statement %d for message %q: %w", j+1, it.id, err)
			}
		}
	}
	return nil
}

// maxRowsParams bounds the parameters of one multi-row statement (the
// protocol allows 65,535).
const maxRowsParams = 60000

// applyRows runs the statement for all items as multi-row statements.
func (s *Sink) applyRows(ctx context.Context, tx *sql.Tx, items []item) error {
	per := max(1, maxRowsParams/s.rows.params)
	for chunk := range slices.Chunk(items, per) {
		args := make([]any, 0, s.rows.params*len(chunk))
		for _, it := range chunk {
			args = append(args, it.args[0]...)
		}
		if err := s.exec(ctx, tx, s.rows.sql(len(chunk)), args); err != nil {
			if isContentError(err) {
				return &refusedError{at: -1, err: err}
			}
			return fmt.Errorf("statement for %d messages: %w", len(chunk), err)
		}
	}
	return nil
}

// maxCached bounds the multi-row statements kept prepared (one per batch
// size and table), well below the server's max_prepared_stmt_count.
const maxCached = 16

// warm prepares the statements a transaction over n items will run, on
// the database and before the transaction, so that a Store never waits for
// a second connection while holding one. It keeps them while fewer than
// maxCached are; a batch of a size seen before then costs one round trip
// per statement and no parsing.
func (s *Sink) warm(ctx context.Context, n int, multi bool) error {
	var queries []string
	if !s.cfg.NoInbox {
		queries = append(queries, s.inboxSQL(n))
	}
	if multi {
		queries = append(queries, s.rows.sql(min(n, max(1, maxRowsParams/s.rows.params))))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, q := range queries {
		if _, ok := s.cache[q]; ok || len(s.cache) >= maxCached {
			continue
		}
		p, err := s.db.PrepareContext(ctx, q)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		s.cache[q] = p
	}
	return nil
}

// exec runs query in tx, with its prepared statement when warm kept one.
func (s *Sink) exec(ctx context.Context, tx *sql.Tx, query string, args []any) error {
	s.mu.Lock()
	p := s.cache[query]
	s.mu.Unlock()
	var err error
	if p != nil {
		_, err = tx.StmtContext(ctx, p).ExecContext(ctx, args...)
	} else {
		_, err = tx.ExecContext(ctx, query, args...)
	}
	return err
}
