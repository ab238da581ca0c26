// Package mysqlsink stores consumed messages in MySQL or MariaDB
// (go-sql-driver/mysql): one batched multi-row INSERT per batch in a
// transaction, idempotent by message id (primary key; a redelivered id
// changes nothing), on a schema created by the migrations embedded in this
// package. A database that is down or fails the transaction is a retryable
// error: nothing of the batch is acknowledged.
package mysqlsink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/pkg/consume"
)

var _ consume.Sink = (*Sink)(nil)

// Sink is the MySQL sink over the messages table.
type Sink struct {
	db *sql.DB
}

// New returns a Sink on db. Call Migrate first.
func New(db *sql.DB) *Sink { return &Sink{db: db} }

// Open opens dsn (go-sql-driver format), applies the migrations and returns
// the sink and the database.
func Open(ctx context.Context, dsn string) (*Sink, *sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("open MySQL: %w", err)
	}
	if err := Migrate(ctx, db); err != nil {
		db.Close()
		return nil, nil, err
	}
	return New(db), db, nil
}

// permanentCodes are MySQL errors caused by one row's content: retrying the
// same row can never succeed.
var permanentCodes = map[uint16]bool{
	1264: true, // out of range value
	1366: true, // incorrect string value
	1406: true, // data too long
	3140: true, // invalid JSON text (MySQL)
	4025: true, // CONSTRAINT failed (MariaDB's JSON check)
}

func isPermanent(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && permanentCodes[me.Number]
}

// Store inserts msgs in one transaction. When the batch fails because of a
// row's content, it stores the rows one by one so that only the bad rows are
// refused (permanent, with the database's reason).
func (s *Sink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	res := make([]consume.Result, len(msgs))
	if len(msgs) == 0 {
		return res, nil
	}
	err := s.insert(ctx, msgs)
	if err == nil {
		return res, nil
	}
	if !isPermanent(err) {
		return nil, fmt.Errorf("store %d messages: %w", len(msgs), err)
	}
	for i, m := range msgs {
		err := s.insert(ctx, []consume.Message{m})
		switch {
		case err == nil:
		case isPermanent(err):
			res[i] = consume.Result{Outcome: consume.Permanent, Reason: fmt.Sprintf("MySQL refused the row: %v", err)}
		default:
			res[i] = consume.Result{Outcome: consume.Retryable, Reason: err.Error()}
		}
	}
	return res, nil
}

func (s *Sink) insert(ctx context.Context, msgs []consume.Message) error {
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
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
		tx.Rollback()
		return fmt.Errorf("insert: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
