package mysqlsink_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// fixedTable is the sink as it was before statements and the inbox: one
// multi-row INSERT of id and body into messages per batch, in a
// transaction. It is the baseline of BenchmarkStore.
func fixedTable(ctx context.Context, db *sql.DB, msgs []consume.Message) error {
	var q strings.Builder
	q.WriteString("INSERT INTO messages (id, body) VALUES ")
	args := make([]any, 0, 2*len(msgs))
	for i, m := range msgs {
		if i > 0 {
			q.WriteString(",")
		}
		q.WriteString("(?,?)")
		args = append(args, m.ID, string(m.Body))
	}
	q.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// benchOrders and benchUpsert are the example: an orders table of
// the application's and the upsert a team would configure.
const (
	benchOrders = `CREATE TABLE bench_orders (
  id       BIGINT        NOT NULL PRIMARY KEY,
  customer VARCHAR(64)   NOT NULL,
  total    DECIMAL(10,2) NOT NULL
)`
	benchUpsert = `INSERT INTO bench_orders (id, customer, total) VALUES (:json.order_id, :json.customer, :json.total)
ON DUPLICATE KEY UPDATE total = VALUES(total)`
)

// BenchmarkStore compares, in one run and interleaved batch by batch (so
// that the shared machine's load falls on all alike), three ways to store
// the same new orders: today's fixed table without an inbox (fixed), the
// default table with the inbox (default+inbox), and the user's upsert into
// an orders table with the inbox (statement+inbox: benchUpsert). It reports each one's
// messages per second and the ratios to fixed.
func BenchmarkStore(b *testing.B) {
	for _, size := range []int{10, 100} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			benchStore(b, open(b), size)
		})
	}
}

func benchStore(b *testing.B, db *sql.DB, size int) {
	ctx := context.Background()
	if _, err := db.Exec(benchOrders); err != nil {
		b.Fatal(err)
	}
	stmt, err := mysqlsink.Prepare(ctx, db, mysqlsink.Config{Statement: benchUpsert})
	if err != nil {
		b.Fatal(err)
	}
	def := mysqlsink.New(db)
	batch := func(kind string, n int) []consume.Message { return batchOrders(kind, n, size) }
	var fixed, withInbox, withStmt time.Duration
	n := 0
	for b.Loop() {
		t0 := time.Now()
		if err := fixedTable(ctx, db, batch("fixed", n)); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := def.Store(ctx, batch("default", n)); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := stmt.Store(ctx, batch("stmt", n)); err != nil {
			b.Fatal(err)
		}
		t3 := time.Now()
		fixed, withInbox, withStmt = fixed+t1.Sub(t0), withInbox+t2.Sub(t1), withStmt+t3.Sub(t2)
		n++
	}
	msgs := float64(n * size)
	b.ReportMetric(msgs/fixed.Seconds(), "fixed-msg/s")
	b.ReportMetric(msgs/withInbox.Seconds(), "default+inbox-msg/s")
	b.ReportMetric(msgs/withStmt.Seconds(), "statement+inbox-msg/s")
	b.ReportMetric(fixed.Seconds()/withInbox.Seconds(), "default/fixed")
	b.ReportMetric(fixed.Seconds()/withStmt.Seconds(), "statement/fixed")
}

// batchOrders is the n-th batch of size new orders, ids prefixed by kind.
func batchOrders(kind string, n, size int) []consume.Message {
	ms := make([]consume.Message, size)
	for i := range ms {
		id := n*size + i
		ms[i] = order(fmt.Sprintf("%s-%d", kind, id), id, "customer", "12.50")
	}
	return ms
}
