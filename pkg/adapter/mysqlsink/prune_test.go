package mysqlsink_test

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// fillOld puts n inbox rows stored long before any retention.
func fillOld(t *testing.T, db *sql.DB, n int) {
	t.Helper()
	if _, err := db.Exec(`INSERT INTO sluice_inbox (message_id, body_sha256, stored_at)
SELECT CONCAT('old-', seq), UNHEX(SHA2('x', 256)), '2025-01-01' FROM seq_1_to_` + itoa(n)); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// lockOld begins a transaction that holds the inbox's old rows (read
// committed: those rows only, no gap), as a long report or a backup would.
func lockOld(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.Exec("SELECT message_id FROM sluice_inbox WHERE stored_at < '2025-06-01' FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	return tx
}

// lockWaits counts the transactions waiting for a lock that blocker
// holds (nil: for any lock, among this database's connections only: other
// packages' tests share the server).
func lockWaits(t *testing.T, db *sql.DB, blocker *sql.Tx) int {
	t.Helper()
	q, args := `SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS w
		JOIN information_schema.INNODB_TRX x ON x.trx_id = w.requesting_trx_id
		JOIN information_schema.PROCESSLIST p ON p.ID = x.trx_mysql_thread_id
		WHERE p.DB = DATABASE()`, []any{}
	if blocker != nil {
		var trx string
		if err := blocker.QueryRow("SELECT trx_id FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()").Scan(&trx); err != nil {
			t.Fatal(err)
		}
		q, args = "SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS WHERE blocking_trx_id = ?", []any{trx}
	}
	var n int
	if err := db.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestStoreDoesNotWaitForThePrune: the inbox holds rows past the retention
// that another transaction keeps locked, so that deleting them waits. A
// Store must return without waiting for that: pruning is not on its path.
func TestStoreDoesNotWaitForThePrune(t *testing.T) {
	db := userDB(t, ledgerSchema)
	fillOld(t, db, 1200)
	s := prepare(t, db, mysqlsink.Config{Statement: appendLedger})
	other := lockOld(t, db)
	if waits := storeUnlessWaiting(t, s, other, func() int { return lockWaits(t, db, other) }, 0); waits > 0 {
		t.Fatal("Store waited for a lock on the inbox's old rows (a prune on its path); want it to return without")
	}
}

// storeUnlessWaiting stores one message while other holds locks, polling
// waits until the Store returns. It returns 0 when the Store stored with
// waits never above allowed, else what waits said when it was (then other
// is rolled back to let the Store end).
func storeUnlessWaiting(t *testing.T, s *mysqlsink.Sink, other *sql.Tx, waits func() int, allowed int) int {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := s.Store(context.Background(), []consume.Message{order("a", 1, "ann", "1")})
		done <- err
	}()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Store = %v; want stored", err)
			}
			return 0
		case <-time.After(100 * time.Millisecond):
		}
		if n := waits(); n > allowed {
			other.Rollback()
			<-done
			return n
		}
	}
}

func TestInboxPrunedInChunksByPruner(t *testing.T) {
	db := userDB(t, ledgerSchema)
	fillOld(t, db, 1200)
	s := prepare(t, db, mysqlsink.Config{Statement: appendLedger})
	store(t, s, order("a", 1, "ann", "1"))
	p := mysqlsink.NewPruner(s, mysqlsink.PruneConfig{Chunk: 500})
	if behind := mysqlsink.PruneRound(context.Background(), p); behind {
		t.Errorf("PruneRound = behind; want every old row removed within the budget")
	}
	if got := query(t, db, "SELECT message_id FROM sluice_inbox"); got != "a" {
		t.Errorf("inbox = %.40s...; want only a", got)
	}
	if got := s.Stats().Pruned.Load(); got != 1200 {
		t.Errorf("Stats().Pruned = %d; want 1200", got)
	}
}

// TestPruneReadsOnlyOldRows: one DELETE of the pruner reads the rows it
// removes and the first one it keeps, never the whole inbox (a DELETE
// that read the stored_at index end to end took 20 s on 5 M rows).
func TestPruneReadsOnlyOldRows(t *testing.T) {
	db := userDB(t, ledgerSchema)
	fillOld(t, db, 30)
	if _, err := db.Exec(`INSERT INTO sluice_inbox (message_id, body_sha256, stored_at)
SELECT CONCAT('new-', seq), UNHEX(SHA2('x', 256)), NOW(6) FROM seq_1_to_20000`); err != nil {
		t.Fatal(err)
	}
	s := prepare(t, db, mysqlsink.Config{Statement: appendLedger})
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	own := -(handlerReads(t, conn) - handlerReads(t, conn)) // what reading the counters reads
	for _, tt := range []struct {
		chunk   int
		removed int64
	}{{20, 20}, {20, 10}, {20, 0}} {
		before := handlerReads(t, conn) + own
		n, err := mysqlsink.PruneOn(ctx, s, conn, tt.chunk)
		if err != nil || n != tt.removed {
			t.Fatalf("PruneOn(%d) = %d, %v; want %d", tt.chunk, n, err, tt.removed)
		}
		if read := handlerReads(t, conn) - before; read > int64(tt.chunk)+5 {
			t.Errorf("a DELETE of %d rows (of at most %d) read %d index entries; want at most %d (a range scan of the old rows)", n, tt.chunk, read, tt.chunk+5)
		}
	}
}

// handlerReads is how many rows and index entries conn's session has read.
func handlerReads(t *testing.T, conn *sql.Conn) int64 {
	t.Helper()
	var n sql.NullInt64
	q := "SELECT SUM(VARIABLE_VALUE) FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME LIKE 'HANDLER\\_READ\\_%'"
	if err := conn.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n.Int64
}

// TestPruneFailureIsLoggedOnce: a prune that waits on locked rows past its
// budget, or that the database refuses (no DELETE grant, simulated by a
// trigger raising the same error), is logged once with what to fix, and a
// Store meanwhile stores.
func TestPruneFailureIsLoggedOnce(t *testing.T) {
	for _, tt := range []struct {
		name, setup, want string
	}{
		{name: "lock held past the budget", want: "did not finish within the round's budget"},
		{name: "no DELETE grant", want: "GRANT DELETE ON",
			setup: "CREATE TRIGGER deny BEFORE DELETE ON sluice_inbox FOR EACH ROW SIGNAL SQLSTATE '42000' SET MYSQL_ERRNO = 1142, MESSAGE_TEXT = 'DELETE command denied to user'"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := userDB(t, ledgerSchema)
			fillOld(t, db, 50)
			var logs strings.Builder // the rounds run on this goroutine
			s := prepare(t, db, mysqlsink.Config{Statement: appendLedger, Log: slog.New(slog.NewTextHandler(&logs, nil))})
			if tt.setup != "" {
				if _, err := db.Exec(tt.setup); err != nil {
					t.Fatal(err)
				}
			} else {
				lockOld(t, db)
			}
			p := mysqlsink.NewPruner(s, mysqlsink.PruneConfig{Budget: 300 * time.Millisecond})
			ctx := context.Background()
			for range 3 {
				if behind := mysqlsink.PruneRound(ctx, p); behind {
					t.Errorf("PruneRound after a failure = behind; want the next round after Every")
				}
			}
			if got := strings.Count(logs.String(), tt.want); got != 1 {
				t.Errorf("log after 3 failed rounds has %d warnings naming %q; want 1:\n%s", got, tt.want, logs.String())
			}
			if got := outcomes(store(t, s, order("a", 1, "ann", "1"))); got != "stored" {
				t.Errorf("Store while pruning fails = %s; want stored", got)
			}
			if got := query(t, db, "SELECT COUNT(*) FROM sluice_inbox"); got != "51" {
				t.Errorf("inbox rows = %s; want 51 (nothing pruned, a stored)", got)
			}
		})
	}
}

// TestStartPrunerPrunesUntilStopped: the pruner's goroutine works off old
// rows in rounds and Stop ends it; with NoPrune nothing is removed.
func TestStartPrunerPrunesUntilStopped(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoPrune=%v", off), func(t *testing.T) {
			db := userDB(t, ledgerSchema)
			fillOld(t, db, 120)
			s := prepare(t, db, mysqlsink.Config{Statement: appendLedger, NoPrune: off})
			p := s.StartPruner(mysqlsink.PruneConfig{Chunk: 50, Behind: time.Millisecond})
			deadline := time.Now().Add(30 * time.Second)
			for !off && s.Stats().Pruned.Load() < 120 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			p.Stop()
			want := "0"
			if off {
				want = "120"
			}
			if got := query(t, db, "SELECT COUNT(*) FROM sluice_inbox"); got != want {
				t.Errorf("inbox rows after Stop = %s; want %s", got, want)
			}
		})
	}
}

func TestConfigFromEnvPrune(t *testing.T) {
	for _, tt := range []struct {
		v       string
		noPrune bool
		err     bool
	}{{"", false, false}, {"on", false, false}, {"off", true, false}, {"no", false, true}} {
		c, err := mysqlsink.ConfigFromEnv(func(k string) string {
			if k == mysqlsink.EnvPrune {
				return tt.v
			}
			return ""
		})
		if (err != nil) != tt.err || c.NoPrune != tt.noPrune {
			t.Errorf("ConfigFromEnv(%s=%q) = NoPrune %v, %v; want %v, error %v", mysqlsink.EnvPrune, tt.v, c.NoPrune, err, tt.noPrune, tt.err)
		}
	}
}

// TestStoreDoesNotWaitBehindThePruner: the pruner's DELETE waits for old
// rows another transaction holds; a Store meanwhile must not queue behind
// that DELETE (at repeatable read its next-key lock request on the first
// old row would block an insert into the gap before it).
func TestStoreDoesNotWaitBehindThePruner(t *testing.T) {
	db := userDB(t, ledgerSchema)
	fillOld(t, db, 50)
	s := prepare(t, db, mysqlsink.Config{Statement: appendLedger})
	other := lockOld(t, db)
	p := mysqlsink.NewPruner(s, mysqlsink.PruneConfig{Budget: 20 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	pruned := make(chan struct{})
	go func() { defer close(pruned); mysqlsink.PruneRound(ctx, p) }()
	defer func() { cancel(); <-pruned }()
	waitForLockWait(t, db, other)
	if n := storeUnlessWaiting(t, s, other, func() int { return lockWaits(t, db, nil) }, 1); n > 0 {
		t.Fatalf("%d lock waits while the pruner waited: the Store queued behind the pruner's DELETE; want it to store at once", n)
	}
}

// stepClock is a clock whose every reading is step after the last, and
// whose Sleep returns at once, noting what it was asked to wait.
type stepClock struct {
	now   time.Time
	step  time.Duration
	slept []time.Duration
}

func (c *stepClock) Now() time.Time { c.now = c.now.Add(c.step); return c.now }

func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	return ctx.Err()
}

// TestPrunerRestsBetweenDeletes: while old rows remain, the pruner rests
// after each DELETE in proportion to the time it took, so that deleting a
// backlog takes at most Duty of the database's time from the consumers'
// stores (back to back, on an inbox of 15 M old rows, they cut one
// consumer paced at 1,000 msg/s to 919).
func TestPrunerRestsBetweenDeletes(t *testing.T) {
	db := userDB(t, ledgerSchema)
	fillOld(t, db, 500)
	s := prepare(t, db, mysqlsink.Config{Statement: appendLedger})
	p := mysqlsink.NewPruner(s, mysqlsink.PruneConfig{Chunk: 100, Duty: 0.25})
	clock := &stepClock{now: time.Unix(0, 0), step: 100 * time.Millisecond} // each DELETE takes 100 ms by this clock
	mysqlsink.SetPruneClock(p, clock)
	if behind := mysqlsink.PruneRound(context.Background(), p); behind {
		t.Fatalf("PruneRound = behind; want every old row removed")
	}
	if got := s.Stats().Pruned.Load(); got != 500 {
		t.Errorf("pruned %d; want 500", got)
	}
	// Five full DELETEs, each followed by a rest of 100 ms x 0.75 / 0.25.
	if len(clock.slept) != 5 {
		t.Fatalf("rests %v; want 5, one after each full DELETE", clock.slept)
	}
	for _, d := range clock.slept {
		if d < 300*time.Millisecond {
			t.Errorf("rest %v after a DELETE of 100 ms; want at least 300 ms (Duty 0.25)", d)
		}
	}
}
