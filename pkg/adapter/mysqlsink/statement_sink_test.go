package mysqlsink_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
)

// ordersSchema is a user's own table: its own primary key, columns typed
// by the application.
const ordersSchema = `CREATE TABLE orders (
  order_id  BIGINT        NOT NULL PRIMARY KEY,
  customer  VARCHAR(16)   NOT NULL,
  total     DECIMAL(10,2) NOT NULL CHECK (total >= 0),
  msg_id    VARCHAR(64)   NULL,
  trace     VARCHAR(255)  NULL,
  raw       JSON          NULL
)`

// upsert is the statement of the orders examples.
const upsert = `INSERT INTO orders (order_id, customer, total, msg_id, trace, raw)
VALUES (:json.order_id, :json.customer, :json.total, :id, :attr.trace, :body)
ON DUPLICATE KEY UPDATE total = VALUES(total)`

// ledgerSchema is a table whose statement is not idempotent: every
// execution adds a row, so only the inbox keeps a redelivery out.
const ledgerSchema = `CREATE TABLE ledger (
  n         BIGINT AUTO_INCREMENT PRIMARY KEY,
  order_id  BIGINT NOT NULL,
  amount    DECIMAL(10,2) NOT NULL
)`

const appendLedger = `INSERT INTO ledger (order_id, amount) VALUES (:json.order_id, :json.total)`

// userDB is a fresh migrated database with the user's tables.
func userDB(t *testing.T, ddl ...string) *sql.DB {
	t.Helper()
	db := open(t)
	for _, q := range ddl {
		if err := retry(func() error { _, err := db.Exec(q); return err }); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return db
}

func prepare(t *testing.T, db *sql.DB, cfg mysqlsink.Config) *mysqlsink.Sink {
	t.Helper()
	var s *mysqlsink.Sink
	err := retry(func() (err error) { s, err = mysqlsink.Prepare(context.Background(), db, cfg); return err })
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func order(id string, orderID int, customer string, total string) consume.Message {
	return consume.Message{ID: id, Body: fmt.Appendf(nil, `{"order_id":%d,"customer":%q,"total":%s}`, orderID, customer, total),
		Attributes: map[string]string{"trace": "t-" + id}}
}

func store(t *testing.T, s consume.Sink, msgs ...consume.Message) []consume.Result {
	t.Helper()
	var res []consume.Result
	err := retry(func() (err error) { res, err = s.Store(context.Background(), msgs); return err })
	if err != nil {
		t.Fatalf("Store: %v", err)
	}
	if len(res) != len(msgs) {
		t.Fatalf("Store returned %d results for %d messages", len(res), len(msgs))
	}
	return res
}

func query(t *testing.T, db *sql.DB, q string) string {
	t.Helper()
	rows, err := db.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		vals, err := mysqltest.ScanRow(rows)
		if err != nil {
			t.Fatal(err)
		}
		var f []string
		for _, v := range vals {
			if v.Valid {
				f = append(f, v.String)
			} else {
				f = append(f, "NULL")
			}
		}
		out = append(out, strings.Join(f, "|"))
	}
	return strings.Join(out, "\n")
}

func outcomes(res []consume.Result) string {
	var out []string
	for _, r := range res {
		out = append(out, r.Outcome.String())
	}
	return strings.Join(out, " ")
}

func TestStatementPlaceholders(t *testing.T) {
	db := userDB(t, ordersSchema)
	s := prepare(t, db, mysqlsink.Config{Statement: upsert, Loop: "orders-loop"})
	res := store(t, s, order("m1", 1, "ann", "12.50"), order("m2", 2, "bob", "7"))
	if got := outcomes(res); got != "stored stored" {
		t.Fatalf("outcomes = %s; want stored stored", got)
	}
	got := query(t, db, "SELECT order_id, customer, total, msg_id, trace, JSON_VALUE(raw, '$.customer') FROM orders ORDER BY order_id")
	want := "1|ann|12.50|m1|t-m1|ann\n2|bob|7.00|m2|t-m2|bob"
	if got != want {
		t.Errorf("orders =\n%s\nwant\n%s", got, want)
	}
	if got := query(t, db, "SELECT message_id, loop_id, LENGTH(body_sha256) FROM sluice_inbox ORDER BY message_id"); got != "m1|orders-loop|32\nm2|orders-loop|32" {
		t.Errorf("inbox = %s", got)
	}
}

// TestStatementRedelivery: a message whose id the inbox holds changes
// nothing when its body is the same (a duplicate) and is poison when it is
// not (an id collision), in a later batch or in the same one.
func TestStatementRedelivery(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second []consume.Message
		outcomes      string
		ledger        string // order_id|amount rows
		stat          string
		count         func(*mysqlsink.Stats) int64
	}{{
		name:  "duplicate changes nothing",
		first: []consume.Message{order("a", 1, "ann", "1"), order("b", 2, "bob", "2")},
		// a redelivery of a and b, c twice in one batch
		second:   []consume.Message{order("b", 2, "bob", "2"), order("c", 3, "cid", "3"), order("a", 1, "ann", "1"), order("c", 3, "cid", "3")},
		outcomes: "stored stored stored stored",
		ledger:   "1|1.00\n2|2.00\n3|3.00",
		stat:     "Duplicates",
		count:    func(s *mysqlsink.Stats) int64 { return s.Duplicates.Load() },
	}, {
		name:     "id collision is poison",
		first:    []consume.Message{order("a", 1, "ann", "1")},
		second:   []consume.Message{order("a", 9, "eve", "9"), order("b", 2, "bob", "2"), order("b", 8, "eve", "8")},
		outcomes: "permanent stored permanent",
		ledger:   "1|1.00\n2|2.00",
		stat:     "Collisions",
		count:    func(s *mysqlsink.Stats) int64 { return s.Collisions.Load() },
	}} {
		t.Run(tc.name, func(t *testing.T) {
			db := userDB(t, ledgerSchema)
			s := prepare(t, db, mysqlsink.Config{Statement: appendLedger})
			store(t, s, tc.first...)
			res := store(t, s, tc.second...)
			if got := outcomes(res); got != tc.outcomes {
				t.Fatalf("outcomes = %s; want %s", got, tc.outcomes)
			}
			for i, r := range res {
				if r.Outcome == consume.Permanent && !strings.Contains(r.Reason, "id collision") {
					t.Errorf("reason %d = %q; want it to say id collision", i, r.Reason)
				}
			}
			if got := query(t, db, "SELECT order_id, amount FROM ledger ORDER BY order_id"); got != tc.ledger {
				t.Errorf("ledger =\n%s\nwant\n%s", got, tc.ledger)
			}
			if got := tc.count(s.Stats()); got != 2 {
				t.Errorf("Stats().%s = %d; want 2", tc.stat, got)
			}
		})
	}
}

func TestStatementPoisonLeavesTheRest(t *testing.T) {
	db := userDB(t, ordersSchema)
	s := prepare(t, db, mysqlsink.Config{Statement: upsert})
	msgs := []consume.Message{
		order("ok1", 1, "ann", "1"),
		{ID: "nopath", Body: []byte(`{"order_id":2,"total":2}`), Attributes: map[string]string{"trace": "x"}},
		order("toolong", 3, "a customer name far too long", "3"),
		order("negative", 4, "dan", "-4"),
		order("badtype", 5, "eve", `"five"`),
		{ID: "noattr", Body: []byte(`{"order_id":6,"customer":"fay","total":6}`)},
		order("ok2", 7, "gus", "7"),
	}
	res := store(t, s, msgs...)
	want := map[string]string{"nopath": "JSON path customer", "toolong": "Data too long", "negative": "CONSTRAINT", "badtype": "Incorrect decimal value", "noattr": `no attribute "trace"`}
	for i, r := range res {
		w, poison := want[msgs[i].ID]
		if poison != (r.Outcome == consume.Permanent) || !strings.Contains(r.Reason, w) {
			t.Errorf("%s: %v %q; want poison %v with %q", msgs[i].ID, r.Outcome, r.Reason, poison, w)
		}
	}
	if got := query(t, db, "SELECT order_id FROM orders ORDER BY order_id"); got != "1\n7" {
		t.Errorf("orders = %s; want 1 and 7", got)
	}
	if got := query(t, db, "SELECT message_id FROM sluice_inbox ORDER BY message_id"); got != "ok1\nok2" {
		t.Errorf("inbox = %s; want ok1 and ok2: a refused message leaves no inbox row", got)
	}
}

func TestStatementInjectionChangesOnlyTheBoundValue(t *testing.T) {
	db := userDB(t, ordersSchema)
	s := prepare(t, db, mysqlsink.Config{Statement: upsert})
	evil := `x'); DROP TABLE orders; -- "; DELETE FROM sluice_inbox; #`
	m := consume.Message{ID: `id'; DROP TABLE orders; --`, Attributes: map[string]string{"trace": evil},
		Body: []byte(`{"order_id":1,"customer":"o'; DROP\";--","total":1,"note":"` + strings.ReplaceAll(evil, `"`, `\"`) + `"}`)}
	if got := outcomes(store(t, s, m)); got != "stored" {
		t.Fatalf("outcome = %s; want stored", got)
	}
	got := query(t, db, "SELECT customer, msg_id, trace, JSON_VALUE(raw, '$.note') FROM orders")
	want := `o'; DROP";--|id'; DROP TABLE orders; --|` + evil + "|" + evil
	if got != want {
		t.Errorf("row =\n%s\nwant\n%s", got, want)
	}
	if got := query(t, db, "SELECT COUNT(*) FROM sluice_inbox"); got != "1" {
		t.Errorf("inbox rows = %s; want 1", got)
	}
}

func TestStatementsRunInOneTransaction(t *testing.T) {
	db := userDB(t, ordersSchema, ledgerSchema)
	// The second statement refuses order 2 (negative amount is fine in the
	// ledger, but customer "bad" does not fit): its first statement must be
	// rolled back with it.
	text := appendLedger + ";\n" + `INSERT INTO orders (order_id, customer, total) VALUES (:json.order_id, :json.customer, :json.total);`
	s := prepare(t, db, mysqlsink.Config{Statement: text})
	res := store(t, s, order("a", 1, "ann", "1"), order("b", 2, "a customer name far too long", "2"), order("c", 3, "cid", "3"))
	if got := outcomes(res); got != "stored permanent stored" {
		t.Fatalf("outcomes = %s", got)
	}
	if !strings.Contains(res[1].Reason, "statement 2") {
		t.Errorf("reason %q; want it to name statement 2", res[1].Reason)
	}
	if got := query(t, db, "SELECT order_id FROM ledger ORDER BY order_id"); got != "1\n3" {
		t.Errorf("ledger = %s; want 1 and 3", got)
	}
}

func TestPrepareRefusesAStatementThatCannotWork(t *testing.T) {
	db := userDB(t, ordersSchema)
	for _, text := range []string{
		"INSERT INTO orders (order_id, nope) VALUES (:id, :body)",
		"INSERT INTO no_such_table VALUES (:id)",
		"INSERT INTO orders (order_id) VALUES (:nope)",
		"INSERT INTO orders (order_id) VALUE (:id", // syntax
	} {
		_, err := mysqlsink.Prepare(context.Background(), db, mysqlsink.Config{Statement: text})
		if !errors.Is(err, mysqlsink.ErrStatement) {
			t.Errorf("Prepare(%q) = %v; want ErrStatement", text, err)
		}
	}
	_, err := mysqlsink.Prepare(context.Background(), db, mysqlsink.Config{Statement: "INSERT INTO orders (order_id, nope) VALUES (:id, :body)"})
	if err == nil || !strings.Contains(err.Error(), "Unknown column 'nope'") {
		t.Errorf("Prepare error = %v; want the database's reason", err)
	}
}

func TestStatementSinkContract(t *testing.T) {
	consumetest.TestSink(t, func(t *testing.T) consumetest.SinkUnderTest {
		db := userDB(t, "CREATE TABLE seqs (seq INT PRIMARY KEY, n INT NOT NULL)")
		s := prepare(t, db, mysqlsink.Config{Statement: "INSERT INTO seqs (seq, n) VALUES (:json.seq, 1) ON DUPLICATE KEY UPDATE n = n + 1"})
		return consumetest.SinkUnderTest{Sink: retrying{s}, Count: func(t *testing.T) int {
			var n int
			if err := retry(func() error { return db.QueryRow("SELECT COALESCE(SUM(n), 0) FROM seqs").Scan(&n) }); err != nil {
				t.Fatal(err)
			}
			return n
		}}
	})
}

func TestPrefixSeparatesDeployments(t *testing.T) {
	db := userDB(t, ledgerSchema)
	ctx := context.Background()
	for _, p := range []string{"app1_", "app2_"} {
		if err := retry(func() error { return mysqlsink.MigratePrefix(ctx, db, p) }); err != nil {
			t.Fatalf("MigratePrefix(%q): %v", p, err)
		}
	}
	s1 := prepare(t, db, mysqlsink.Config{Statement: appendLedger, Prefix: "app1_"})
	s2 := prepare(t, db, mysqlsink.Config{Prefix: "app2_"})
	store(t, s1, order("a", 1, "ann", "1"))
	store(t, s2, order("a", 1, "ann", "1"))
	if got := query(t, db, "SELECT (SELECT COUNT(*) FROM app1_sluice_inbox), (SELECT COUNT(*) FROM app2_sluice_inbox), (SELECT COUNT(*) FROM app2_messages), (SELECT COUNT(*) FROM app1_messages), (SELECT COUNT(*) FROM ledger)"); got != "1|1|1|0|1" {
		t.Errorf("app1 inbox, app2 inbox, app2 messages, app1 messages, ledger = %s; want 1|1|1|0|1", got)
	}
	if got := query(t, db, "SELECT COUNT(*) FROM app1_schema_migrations"); got != "2" {
		t.Errorf("app1_schema_migrations rows = %s; want 2", got)
	}
	if _, err := mysqlsink.Prepare(ctx, db, mysqlsink.Config{Prefix: "x; DROP TABLE ledger"}); err == nil {
		t.Errorf("Prepare with a prefix that is no identifier = nil; want an error")
	}
}

func TestInboxPrunedAfterRetention(t *testing.T) {
	db := userDB(t, ledgerSchema)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := prepare(t, db, mysqlsink.Config{Statement: appendLedger, Retention: 48 * time.Hour, Now: func() time.Time { return now }})
	store(t, s, order("old", 1, "ann", "1"))
	now = now.Add(24 * time.Hour)
	store(t, s, order("new", 2, "bob", "2"))
	now = now.Add(25 * time.Hour) // "old" is 49 h old, "new" 25 h
	removed, done, err := s.Prune(context.Background(), 10)
	if err != nil || removed != 1 || !done {
		t.Fatalf("Prune = %d, %v, %v; want 1 row, done", removed, done, err)
	}
	if got := query(t, db, "SELECT message_id FROM sluice_inbox"); got != "new" {
		t.Errorf("inbox after prune = %s; want new", got)
	}
}

// TestPrepareWantsTheInbox: a deployment whose migrations are their own
// step (SLUICE_MIGRATE=off) and were not run stops at start, instead of
// failing every batch.
func TestPrepareWantsTheInbox(t *testing.T) {
	db := userDB(t, ledgerSchema)
	_, err := mysqlsink.Prepare(context.Background(), db, mysqlsink.Config{Statement: appendLedger, Prefix: "unmigrated_"})
	if !errors.Is(err, mysqlsink.ErrStatement) || !strings.Contains(err.Error(), "unmigrated_sluice_inbox") || !strings.Contains(err.Error(), "sluice migrate") {
		t.Errorf("Prepare without the inbox = %v; want ErrStatement naming the table and sluice migrate", err)
	}
}
