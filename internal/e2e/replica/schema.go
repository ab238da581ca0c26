package main

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
)

// The consumers write orders into the private primary with make e2e's
// upsert (e2ekit.OrdersStatement). Each order costs the primary CPU by the
// workload of internal/dbload (an aggregate over ScanRows rows, which only
// the primary runs: row-based replication ships the rows it writes, not the
// query) and writes Lines line items into order_lines (three indexes): the
// rows the replica has to apply, one after the other.
const orderLinesTable = `CREATE TABLE order_lines (
  order_id BIGINT        NOT NULL,
  line     INT           NOT NULL,
  sku      INT           NOT NULL,
  qty      INT           NOT NULL,
  price    DECIMAL(10,2) NOT NULL,
  PRIMARY KEY (order_id, line),
  INDEX by_sku (sku),
  INDEX by_price (price)
) ENGINE=InnoDB`

// installOrders creates orders (e2ekit.InstallOrders: with dbload's
// workload), order_lines and the heartbeat table, and the trigger that
// writes an order's line items (MariaDB's Sequence engine).
func installOrders(ctx context.Context, db *sql.DB, lines int) error {
	if err := e2ekit.InstallOrders(ctx, db); err != nil {
		return err
	}
	for _, stmt := range []string{orderLinesTable, heartbeatTable} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
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
