package main

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
)

// The consumers write orders into the private primary, as in make e2e
// (internal/e2e/full): an upsert into an orders table that counts its
// applications (applied > 1 is a duplicate). Each order costs the primary
// CPU by the workload of internal/dbload (an aggregate over ScanRows rows,
// which only the primary runs: row-based replication ships the rows it
// writes, not the query) and writes Lines line items into order_lines (three
// indexes): the rows the replica has to apply, one after the other.
const (
	ordersTable = `CREATE TABLE orders (
  order_id BIGINT       NOT NULL PRIMARY KEY,
  amount   INT          NOT NULL,
  msg_id   VARCHAR(255) NOT NULL,
  applied  INT          NOT NULL DEFAULT 1
) ENGINE=InnoDB`
	orderLinesTable = `CREATE TABLE order_lines (
  order_id BIGINT        NOT NULL,
  line     INT           NOT NULL,
  sku      INT           NOT NULL,
  qty      INT           NOT NULL,
  price    DECIMAL(10,2) NOT NULL,
  PRIMARY KEY (order_id, line),
  INDEX by_sku (sku),
  INDEX by_price (price)
) ENGINE=InnoDB`
	ordersStatement = `INSERT INTO orders (order_id, amount, msg_id) VALUES (:json.order_id, :json.amount, :id)
ON DUPLICATE KEY UPDATE applied = applied + 1`
)

// installOrders creates orders and order_lines, the trigger that gives
// each order the workload dbload installed on its messages table, and the
// trigger that writes an order's lines items (MariaDB's Sequence engine).
func installOrders(ctx context.Context, db *sql.DB, lines int) error {
	for _, stmt := range []string{ordersTable, orderLinesTable, heartbeatTable} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
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
	if lines > 0 {
		q := fmt.Sprintf(`CREATE TRIGGER orders_lines AFTER INSERT ON orders FOR EACH ROW FOLLOWS orders_workload
INSERT INTO order_lines (order_id, line, sku, qty, price)
SELECT NEW.order_id, seq, (ABS(NEW.order_id) * 31 + seq * 7919) %% 100000, 1 + seq %% 5, (seq * 37) %% 1000 / 10 FROM seq_1_to_%d`, lines)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("create the line items trigger on orders: %w", err)
		}
	}
	return nil
}

// orderCounts is what db holds in orders for order ids [0, sent): rows
// stored, applications beyond the first (duplicates), and ids not stored
// (missing). The capacity test's orders have negative ids.
func orderCounts(ctx context.Context, db *sql.DB, sent int) (stored, duplicates, missing int, err error) {
	rows, err := db.QueryContext(ctx, "SELECT order_id, applied FROM orders WHERE order_id >= 0")
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
		seen[id] = true
	}
	if err := rows.Err(); err != nil {
		return 0, 0, 0, err
	}
	for i := range sent {
		if !seen[i] {
			missing++
		}
	}
	return stored, duplicates, missing, nil
}
