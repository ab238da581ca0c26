package mysqlsink_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

const countersSchema = `CREATE TABLE counters (id BIGINT PRIMARY KEY, n INT NOT NULL)`

// waitForLockWait waits until a transaction waits for a row lock that
// the transaction blocker holds.
func waitForLockWait(t *testing.T, db *sql.DB, blocker *sql.Tx) {
	t.Helper()
	var trx string
	if err := blocker.QueryRow("SELECT trx_id FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = CONNECTION_ID()").Scan(&trx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.INNODB_LOCK_WAITS WHERE blocking_trx_id = ?", trx).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(100 * time.Millisecond) // the query takes InnoDB's lock latch: poll gently
	}
	t.Fatal("nothing waited for the row lock")
}

// TestDeadlockIsRetried provokes a deadlock: another transaction holds
// counter 1 and has written many rows (so that the database picks the
// sink's lighter transaction as the victim); the sink's batch locks counter
// 2, then waits for counter 1; the other transaction then asks for counter
// 2. The sink must retry its batch and store all of it.
func TestDeadlockIsRetried(t *testing.T) {
	db := userDB(t, countersSchema, "INSERT INTO counters VALUES (1, 0), (2, 0)", "CREATE TABLE heavy (n INT)")
	s := prepare(t, db, mysqlsink.Config{Statement: "UPDATE counters SET n = n + 1 WHERE id = :json.id"})
	ctx := context.Background()
	other, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	for _, q := range []string{"INSERT INTO heavy SELECT seq FROM seq_1_to_2000", "UPDATE counters SET n = n + 100 WHERE id = 1"} {
		if _, err := other.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		res []consume.Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := s.Store(ctx, []consume.Message{{ID: "a", Body: []byte(`{"id":2}`)}, {ID: "b", Body: []byte(`{"id":1}`)}})
		done <- result{res, err}
	}()
	waitForLockWait(t, db, other)
	if _, err := other.Exec("UPDATE counters SET n = n + 100 WHERE id = 2"); err != nil {
		t.Fatalf("the other transaction was the victim (%v); want the sink's", err)
	}
	if err := other.Commit(); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil || outcomes(r.res) != "stored stored" {
		t.Fatalf("Store = %v, %v; want both stored after retrying the deadlock", r.res, r.err)
	}
	if got := s.Stats().Deadlocks.Load(); got < 1 {
		t.Errorf("Stats().Deadlocks = %d; want >= 1", got)
	}
	if got := query(t, db, "SELECT n FROM counters ORDER BY id"); got != "101\n101" {
		t.Errorf("counters = %s; want 101 and 101 (each applied once)", got)
	}
}

// TestLockWaitTimeoutIsRetryable: a row held by another transaction past
// the lock wait timeout fails the whole batch with an error (the consumer
// releases it), stores nothing, and the batch stores once the row is free.
func TestLockWaitTimeoutIsRetryable(t *testing.T) {
	base, dsn := openDSN(t)
	for _, q := range []string{countersSchema, "INSERT INTO counters VALUES (1, 0), (2, 0)"} {
		if _, err := base.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["innodb_lock_wait_timeout"] = "1"
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s := prepare(t, db, mysqlsink.Config{Statement: "UPDATE counters SET n = n + 1 WHERE id = :json.id"})
	other, err := base.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback()
	if _, err := other.Exec("UPDATE counters SET n = 100 WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	batch := []consume.Message{{ID: "a", Body: []byte(`{"id":2}`)}, {ID: "b", Body: []byte(`{"id":1}`)}}
	res, err := s.Store(context.Background(), batch)
	if err == nil || !strings.Contains(err.Error(), "1205") {
		t.Fatalf("Store while the row is locked = %v, %v; want an error (lock wait timeout)", res, err)
	}
	if got := query(t, base, "SELECT (SELECT n FROM counters WHERE id = 2), (SELECT COUNT(*) FROM sluice_inbox)"); got != "0|0" {
		t.Errorf("counter 2, inbox rows = %s; want 0|0 (nothing of the batch stored)", got)
	}
	other.Rollback()
	if got := outcomes(store(t, s, batch...)); got != "stored stored" {
		t.Errorf("Store after the lock is gone = %s; want stored stored", got)
	}
}

// TestDefaultTableDetectsIDCollision: without a statement the sink writes
// its messages table, and a second body under a known id is poison.
func TestDefaultTableDetectsIDCollision(t *testing.T) {
	db := open(t)
	s := mysqlsink.New(db)
	store(t, s, consume.Message{ID: "a", Body: []byte(`{"v":1}`)})
	res := store(t, s, consume.Message{ID: "a", Body: []byte(`{"v":1}`)}, consume.Message{ID: "a", Body: []byte(`{"v":2}`)}, consume.Message{ID: "b", Body: []byte(`{"v":3}`)})
	if got := outcomes(res); got != "stored permanent stored" || !strings.Contains(res[1].Reason, "id collision") {
		t.Errorf("outcomes = %s (%q); want stored permanent (id collision) stored", got, res[1].Reason)
	}
	if got := query(t, db, "SELECT id, body FROM messages ORDER BY id"); got != `a|{"v":1}`+"\n"+`b|{"v":3}` {
		t.Errorf("messages = %s", got)
	}
}
