// Package dbload makes a MariaDB (or MySQL) database a plant worth
// controlling: a per-message workload that costs the database real CPU, an
// external load generator that adds CPU load from outside the loop (the
// disturbance), and Plant, the real plant of the lab, which stores messages
// at an allowed rate and measures the database's CPU.
//
// The workload is a trigger on the consumers' messages table (created by
// pkg/adapter/mysqlsink's migration): every inserted message also computes
// an aggregate over a range of ScanRows rows of dbload_data (an index range
// scan, so the cost is proportional to ScanRows), inserts an event row into
// dbload_events (three indexes) and updates a running total per bucket in
// dbload_totals. The consumers' code stays what it is in production; the
// destination is simply a database where each insert costs what a real
// application's insert plus its reporting query would. ScanRows lives in
// dbload_config and can be changed while the loop runs.
package dbload

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
)

// Workload sizes the per-message cost.
type Workload struct {
	// DataRows is the size of dbload_data (default 200,000: about 10 MB,
	// which stays in the buffer pool, so the cost is CPU and not disk).
	DataRows int
	// ScanRows is the number of rows each message's aggregate reads
	// (default 80,000: about 10 ms of one core on this machine's MariaDB
	// 10.11).
	ScanRows int
}

// Defaults of the workload.
const (
	DefaultDataRows = 200_000
	DefaultScanRows = 80_000
)

func (w Workload) withDefaults() Workload {
	w.DataRows = defaults.Positive(w.DataRows, DefaultDataRows)
	w.ScanRows = defaults.Positive(w.ScanRows, DefaultScanRows)
	if w.ScanRows > w.DataRows {
		w.ScanRows = w.DataRows
	}
	return w
}

// schema creates the workload's tables; the trigger is created separately.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS dbload_data (
  k   INT    NOT NULL PRIMARY KEY,
  grp INT    NOT NULL,
  v   DOUBLE NOT NULL,
  INDEX by_grp (grp, v)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS dbload_events (
  id      VARCHAR(255) NOT NULL PRIMARY KEY,
  bucket  INT          NOT NULL,
  amount  DOUBLE       NOT NULL,
  created DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  INDEX by_bucket (bucket, amount),
  INDEX by_created (created),
  INDEX by_amount (amount)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS dbload_totals (
  bucket INT    NOT NULL PRIMARY KEY,
  n      BIGINT NOT NULL,
  total  DOUBLE NOT NULL
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS dbload_config (
  id        TINYINT NOT NULL PRIMARY KEY,
  data_rows INT     NOT NULL,
  scan_rows INT     NOT NULL
) ENGINE=InnoDB`,
}

// trigger is the per-message workload. The range start comes from the
// message id, so messages spread over the table.
const trigger = `CREATE TRIGGER dbload_after_insert AFTER INSERT ON messages FOR EACH ROW
BEGIN
  DECLARE rows_total INT DEFAULT 1;
  DECLARE scan INT DEFAULT 0;
  DECLARE first INT;
  DECLARE s DOUBLE;
  SELECT data_rows, scan_rows INTO rows_total, scan FROM dbload_config WHERE id = 1;
  SET first = CRC32(NEW.id) % GREATEST(rows_total - scan, 1);
  SELECT COALESCE(SUM(v), 0) INTO s FROM dbload_data WHERE k BETWEEN first AND first + scan - 1;
  INSERT INTO dbload_events (id, bucket, amount) VALUES (NEW.id, first % 1000, s)
    ON DUPLICATE KEY UPDATE amount = VALUES(amount);
  INSERT INTO dbload_totals (bucket, n, total) VALUES (first % 1000, 1, s)
    ON DUPLICATE KEY UPDATE n = n + 1, total = total + VALUES(total);
END`

// Install makes db's messages table (mysqlsink's migration) cost w per
// inserted message: it creates the workload's tables, fills dbload_data
// when its size differs, stores w in dbload_config and (re)creates the
// trigger. It is idempotent.
func Install(ctx context.Context, db *sql.DB, w Workload) error {
	w = w.withDefaults()
	if err := mysqlsink.Migrate(ctx, db); err != nil {
		return fmt.Errorf("dbload: %w", err)
	}
	for _, stmt := range schema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("dbload: create tables: %w", err)
		}
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM dbload_data").Scan(&n); err != nil {
		return fmt.Errorf("dbload: count dbload_data: %w", err)
	}
	if n != w.DataRows {
		if _, err := db.ExecContext(ctx, "TRUNCATE TABLE dbload_data"); err != nil {
			return fmt.Errorf("dbload: empty dbload_data: %w", err)
		}
		// MariaDB's Sequence engine gives the rows without a round trip each;
		// v is deterministic so that every run costs the same.
		q := fmt.Sprintf("INSERT INTO dbload_data (k, grp, v) SELECT seq, seq %% 1000, (seq * 7919 %% 10007) / 10007 FROM seq_0_to_%d", w.DataRows-1)
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("dbload: fill dbload_data with %d rows: %w", w.DataRows, err)
		}
	}
	if err := SetScanRows(ctx, db, w.DataRows, w.ScanRows); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "DROP TRIGGER IF EXISTS dbload_after_insert"); err != nil {
		return fmt.Errorf("dbload: drop trigger: %w", err)
	}
	if _, err := db.ExecContext(ctx, trigger); err != nil {
		return fmt.Errorf("dbload: create trigger: %w", err)
	}
	return nil
}

// SetScanRows changes the per-message cost while the loop runs.
func SetScanRows(ctx context.Context, db *sql.DB, dataRows, scanRows int) error {
	_, err := db.ExecContext(ctx, `INSERT INTO dbload_config (id, data_rows, scan_rows) VALUES (1, ?, ?)
ON DUPLICATE KEY UPDATE data_rows = VALUES(data_rows), scan_rows = VALUES(scan_rows)`, dataRows, scanRows)
	if err != nil {
		return fmt.Errorf("dbload: set scan rows %d: %w", scanRows, err)
	}
	return nil
}

// Uninstall removes the trigger (the tables stay for inspection).
func Uninstall(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, "DROP TRIGGER IF EXISTS dbload_after_insert"); err != nil {
		return fmt.Errorf("dbload: drop trigger: %w", err)
	}
	return nil
}

// Aggregate runs the workload's aggregate once from outside, over scanRows
// rows starting at first: what the load generator repeats.
func Aggregate(ctx context.Context, db *sql.DB, first, scanRows int) error {
	var s sql.NullFloat64
	err := db.QueryRowContext(ctx, "SELECT SUM(v) FROM dbload_data WHERE k BETWEEN ? AND ?", first, first+scanRows-1).Scan(&s)
	if err != nil {
		return fmt.Errorf("dbload: aggregate: %w", err)
	}
	return nil
}
