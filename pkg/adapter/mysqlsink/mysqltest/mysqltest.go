// Package mysqltest gives integration tests a fresh MariaDB database with
// the mysqlsink schema, counts what landed in it, and scans rows of
// columns the caller does not list.
package mysqltest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
)

// Database creates a database named sluice_t<unique> next to the one in dsn,
// migrates it, drops it when the test ends, and returns its DSN.
func Database(t testing.TB, dsn string) string {
	t.Helper()
	out, drop, err := Create(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	return out
}

// Open creates a database as Database does and opens it; the handle is
// closed, then the database dropped, when the test ends. It returns the
// handle and the database's DSN.
func Open(t testing.TB, serverDSN string) (*sql.DB, string) {
	t.Helper()
	dsn := Database(t, serverDSN)
	return Conn(t, dsn), dsn
}

// Conn opens dsn for the test and closes it when the test ends.
func Conn(t testing.TB, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Create creates a database named sluice_t<unique> next to the one in dsn
// and migrates it; it returns its DSN and a function that drops it. It
// retries for up to 30 s, so that a MariaDB restarted by a fault-injection
// test running in parallel does not fail the caller.
func Create(ctx context.Context, dsn string) (string, func(), error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, drop, err := create(ctx, dsn)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return out, drop, err
		}
		select {
		case <-ctx.Done():
			return "", nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func create(ctx context.Context, dsn string) (string, func(), error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", nil, fmt.Errorf("parse DSN: %w", err)
	}
	admin, err := sql.Open("mysql", dsn)
	if err != nil {
		return "", nil, err
	}
	defer admin.Close()
	name := fmt.Sprintf("sluice_t%d", time.Now().UnixNano())
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	drop := func() {
		if db, err := sql.Open("mysql", dsn); err == nil {
			db.Exec("DROP DATABASE IF EXISTS " + name)
			db.Close()
		}
	}
	cfg.DBName = name
	out := cfg.FormatDSN()
	db, err := sql.Open("mysql", out)
	if err != nil {
		drop()
		return "", nil, err
	}
	defer db.Close()
	if err := mysqlsink.Migrate(ctx, db); err != nil {
		drop()
		return "", nil, fmt.Errorf("migrate: %w", err)
	}
	return out, drop, nil
}

// ScanRow scans the row rows is on, whatever its columns, into one string
// per column (not Valid where the column is NULL): for statements whose
// columns the caller does not list, such as SHOW SLAVE STATUS.
func ScanRow(rows *sql.Rows) ([]sql.NullString, error) {
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	return vals, nil
}

// Counts is what a no-loss test finds in the messages table, for bodies
// that carry a sequence number {"seq": n} with n in [0, sent).
type Counts struct {
	Sent, Stored, Duplicates, Missing int
}

// Count counts distinct and duplicated sequence numbers among the stored
// rows. Duplicates are rows beyond the first for a sequence number (a
// redelivery stored twice); Missing are sequence numbers in [0, sent) that
// have no row and are not in skip (poison messages, which belong in the
// dead-letter path).
func Count(ctx context.Context, db *sql.DB, sent int, skip map[int]bool) (Counts, error) {
	bySeq, unnumbered, err := SeqCounts(ctx, db)
	if err != nil {
		return Counts{}, err
	}
	c := Counts{Sent: sent, Stored: unnumbered}
	if unnumbered > 0 {
		c.Duplicates = unnumbered - 1
	}
	for _, n := range bySeq {
		c.Stored += n
		c.Duplicates += n - 1
	}
	for i := range sent {
		if bySeq[i] == 0 && !skip[i] {
			c.Missing++
		}
	}
	return c, nil
}

// SeqCounts reads how many rows of the messages table hold each sequence
// number (the body's "seq"), and how many rows hold none.
func SeqCounts(ctx context.Context, db *sql.DB) (bySeq map[int]int, unnumbered int, err error) {
	rows, err := db.QueryContext(ctx, "SELECT CAST(JSON_VALUE(body, '$.seq') AS SIGNED) AS seq, COUNT(*) FROM messages GROUP BY seq")
	if err != nil {
		return nil, 0, fmt.Errorf("count messages: %w", err)
	}
	defer rows.Close()
	bySeq = map[int]int{}
	for rows.Next() {
		var seq sql.NullInt64
		var n int
		if err := rows.Scan(&seq, &n); err != nil {
			return nil, 0, err
		}
		if seq.Valid {
			bySeq[int(seq.Int64)] = n
		} else {
			unnumbered = n
		}
	}
	return bySeq, unnumbered, rows.Err()
}
