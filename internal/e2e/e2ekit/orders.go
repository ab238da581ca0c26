package e2ekit

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// The consumers write into a user-style schema: the application's orders
// table with its own primary key, through an upsert. The upsert counts how
// often an order was applied, so it is not idempotent by itself: only the
// consumer's inbox keeps a redelivery from applying an order twice, and
// applied > 1 is a duplicate.
const (
	OrdersTable = `CREATE TABLE orders (
  order_id BIGINT       NOT NULL PRIMARY KEY,
  amount   INT          NOT NULL,
  msg_id   VARCHAR(255) NOT NULL,
  applied  INT          NOT NULL DEFAULT 1
) ENGINE=InnoDB`
	// OrdersStatement is the consumers' SLUICE_MYSQL_STATEMENT.
	OrdersStatement = `INSERT INTO orders (order_id, amount, msg_id) VALUES (:json.order_id, :json.amount, :id)
ON DUPLICATE KEY UPDATE applied = applied + 1`
)

// InstallOrders creates the orders table and gives it the per-message
// workload that internal/dbload installed on the messages table (the plant
// the step test identifies): the same trigger body, keyed by the message
// id.
func InstallOrders(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, OrdersTable); err != nil {
		return fmt.Errorf("create orders: %w", err)
	}
	var body string
	err := db.QueryRowContext(ctx, `SELECT ACTION_STATEMENT FROM information_schema.TRIGGERS
WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = 'messages' AND ACTION_TIMING = 'AFTER' AND EVENT_MANIPULATION = 'INSERT'`).Scan(&body)
	if err != nil {
		return fmt.Errorf("read the workload trigger on messages: %w", err)
	}
	body = strings.ReplaceAll(body, "NEW.id", "NEW.msg_id")
	if _, err := db.ExecContext(ctx, "CREATE TRIGGER orders_workload AFTER INSERT ON orders FOR EACH ROW "+body); err != nil {
		return fmt.Errorf("create the workload trigger on orders: %w", err)
	}
	return nil
}

// OrderCounts is what db holds in orders for order ids [0, sent): rows
// stored, applications beyond the first (duplicates), and ids neither
// stored nor in skip (missing). Negative ids are not the run's messages.
func OrderCounts(ctx context.Context, db *sql.DB, sent int, skip map[int]bool) (stored, duplicates, missing int, err error) {
	return orderCounts(ctx, db, "SELECT order_id, applied FROM orders WHERE order_id >= 0", 0, sent, skip)
}

// OrderCountsIn is OrderCounts for the order ids [from, to): a part of the
// run, skip holding order ids.
func OrderCountsIn(ctx context.Context, db *sql.DB, from, to int, skip map[int]bool) (stored, duplicates, missing int, err error) {
	seqs := make(map[int]bool, len(skip))
	for id := range skip {
		seqs[id-from] = true
	}
	return OrderCountsFrom(ctx, db, int64(from), to-from, seqs)
}

// OrderCountsFrom is OrderCounts for the orders of Orders whose Offset is
// from: ids [from, from+sent), skip holding seqs (ids less from).
func OrderCountsFrom(ctx context.Context, db *sql.DB, from int64, sent int, skip map[int]bool) (stored, duplicates, missing int, err error) {
	q := fmt.Sprintf("SELECT order_id, applied FROM orders WHERE order_id >= %d AND order_id < %d", from, from+int64(sent))
	return orderCounts(ctx, db, q, from, sent, skip)
}

func orderCounts(ctx context.Context, db *sql.DB, query string, from int64, sent int, skip map[int]bool) (stored, duplicates, missing int, err error) {
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count orders: %w", err)
	}
	defer rows.Close()
	seen := map[int]bool{}
	for rows.Next() {
		var id, applied int
		if err := rows.Scan(&id, &applied); err != nil {
			return 0, 0, 0, err
		}
		stored++
		duplicates += applied - 1
		seen[id-int(from)] = true
	}
	if err := rows.Err(); err != nil {
		return 0, 0, 0, err
	}
	for i := range sent {
		if !seen[i] && !skip[i] {
			missing++
		}
	}
	return stored, duplicates, missing, nil
}

// Orders sends the run's orders to a queue:
// {"order_id":Offset+seq,"amount":seq%97} with seq 0, 1, ... in the order
// sent.
type Orders struct {
	API      QueueAPI
	QueueURL string
	// Offset is added to every order id (several queues' orders in one
	// table).
	Offset int64
	// Poison, when set, says which seqs are sent as poison instead: a body
	// that is not JSON.
	Poison func(seq int64) bool
	// Sent counts the messages sent, Poisoned the poison ones among them.
	Sent, Poisoned atomic.Int64
}

// Send sends n orders with the next sequence numbers, retrying the
// entries SQS did not take.
func (o *Orders) Send(ctx context.Context, n int) error {
	var entries []sqstypes.SendMessageBatchRequestEntry
	for range n {
		seq := o.Sent.Add(1) - 1
		body := fmt.Sprintf(`{"order_id":%d,"amount":%d}`, o.Offset+seq, seq%97)
		if o.Poison != nil && o.Poison(seq) {
			body = fmt.Sprintf("poison %d: not JSON", seq)
			o.Poisoned.Add(1)
		}
		entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(seq)), MessageBody: aws.String(body)})
	}
	return SendEntries(ctx, o.API, o.QueueURL, entries)
}

// Produce starts producers that each keep a backlog of about target
// messages of o in its queue (KeepBacklog) until stop, which waits for
// them; a send that fails is a failure of the run.
func (r *Run) Produce(o *Orders, producers, target int) (stop func()) {
	ctx, cancel := context.WithCancel(r.Ctx)
	var wg sync.WaitGroup
	for range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			KeepBacklog(ctx, o.API, o.QueueURL, target, func(n int) { r.SendOrders(o, n) })
		}()
	}
	return func() { cancel(); wg.Wait() }
}

// SendOrders sends n orders of o even as the run ends; a send that fails
// is a failure of the run.
func (r *Run) SendOrders(o *Orders, n int) {
	if err := o.Send(context.WithoutCancel(r.Ctx), n); err != nil {
		r.Fail("%v", err)
	}
}
