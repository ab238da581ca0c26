package consumers

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// PrefillInbox inserts n rows into db's sluice_inbox (the default prefix),
// as consumers write them: ids that sort as a consumer's do (one prefix, a
// growing sequence), a body hash, stored_at 1 microsecond apart and all
// before before. With before older than the sink's retention every row is
// one the pruner removes, so a pacing measured after it runs on a large
// inbox while the pruner works. It needs MariaDB's Sequence engine and
// inserts 100,000 rows to a statement; log (nil: none) is told every
// million.
func PrefillInbox(ctx context.Context, db *sql.DB, n int64, before time.Time, log func(rows int64)) error {
	const step = 100000
	start := before.UTC().Add(-time.Duration(n+1) * time.Microsecond)
	for from := int64(0); from < n; from += step {
		to := min(from+step, n) - 1
		q := fmt.Sprintf(`INSERT INTO sluice_inbox (message_id, body_sha256, loop_id, stored_at)
SELECT CONCAT('prefill-', LPAD(seq, 12, '0')), UNHEX(SHA2(seq, 256)), 'bench',
       TIMESTAMPADD(MICROSECOND, seq, CAST(? AS DATETIME(6)))
FROM seq_%d_to_%d`, from, to)
		if _, err := db.ExecContext(ctx, q, start.Format("2006-01-02 15:04:05.000000")); err != nil {
			return fmt.Errorf("prefill the inbox, rows %d to %d: %w", from, to, err)
		}
		if log != nil && (to+1)%1000000 == 0 {
			log(to + 1)
		}
	}
	return nil
}

// InboxRows counts the rows of db's sluice_inbox.
func InboxRows(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM sluice_inbox").Scan(&n)
	return n, err
}
