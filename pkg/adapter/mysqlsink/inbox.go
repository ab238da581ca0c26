package mysqlsink

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// errInboxConflict is an inbox insert that met an id already there:
// a redelivery, a collision, or another consumer storing the same message
// at the same moment.
var errInboxConflict = errors.New("message id already in the inbox")

// insertInbox writes the inbox rows of items in one statement. Ids are
// inserted in order so that two consumers holding the same ids lock them in
// the same order.
func (s *Sink) insertInbox(ctx context.Context, tx *sql.Tx, items []item) error {
	sorted := make([]int, len(items))
	for k := range sorted {
		sorted[k] = k
	}
	slices.SortFunc(sorted, func(a, b int) int { return strings.Compare(items[a].id, items[b].id) })
	now := s.cfg.Now().UTC()
	args := make([]any, 0, 4*len(items))
	for _, k := range sorted {
		args = append(args, items[k].id, items[k].hash[:], s.cfg.Loop, now)
	}
	if err := s.exec(ctx, tx, s.inboxSQL(len(items)), args); err != nil {
		if code(err) == 1062 {
			return fmt.Errorf("%w: %w", errInboxConflict, err)
		}
		return fmt.Errorf("insert into %s: %w", s.names.inbox, err)
	}
	return nil
}

// inboxSQL inserts n inbox rows.
func (s *Sink) inboxSQL(n int) string {
	return "INSERT INTO " + s.names.inbox + " (message_id, body_sha256, loop_id, stored_at) VALUES (?,?,?,?)" + strings.Repeat(",(?,?,?,?)", n-1)
}

// settleKnown reads the inbox rows of items and takes out the messages it
// knows: the same body is a duplicate (stored, nothing changes), another
// body an id collision (poison). It returns the rest.
func (s *Sink) settleKnown(ctx context.Context, items []item, res []consume.Result) ([]item, error) {
	known, err := s.readInbox(ctx, items)
	if err != nil {
		return nil, err
	}
	rest := items[:0:0]
	for _, it := range items {
		h, ok := known[it.id]
		switch {
		case !ok:
			rest = append(rest, it)
		case bytes.Equal(h, it.hash[:]):
			s.stats.Duplicates.Add(1)
			res[it.i] = consume.Result{Outcome: consume.Stored}
		default:
			var was [32]byte
			copy(was[:], h)
			res[it.i] = s.collision(it.id, was, it.hash)
		}
	}
	return rest, nil
}

func (s *Sink) readInbox(ctx context.Context, items []item) (map[string][]byte, error) {
	q := "SELECT message_id, body_sha256 FROM " + s.names.inbox + " WHERE message_id IN (?" + strings.Repeat(",?", len(items)-1) + ")"
	args := make([]any, len(items))
	for k, it := range items {
		args[k] = it.id
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", s.names.inbox, err)
	}
	defer rows.Close()
	known := map[string][]byte{}
	for rows.Next() {
		var id, h []byte
		if err := rows.Scan(&id, &h); err != nil {
			return nil, fmt.Errorf("read %s: %w", s.names.inbox, err)
		}
		known[string(id)] = h
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", s.names.inbox, err)
	}
	return known, nil
}

// refusedError is a message the database refused for its content. at is
// its index in the transaction's items, -1 when a multi-row statement
// failed and the row is unknown.
type refusedError struct {
	at, stmt, stmts int
	err             error
}

func (e *refusedError) Error() string {
	if e.stmts > 1 {
		return fmt.Sprintf("statement %d: %v", e.stmt+1, e.err)
	}
	return e.err.Error()
}

func (e *refusedError) Unwrap() error { return e.err }

// contentCodes are MySQL and MariaDB errors caused by a row's content:
// storing the same message again can never succeed.
var contentCodes = map[uint16]string{
	1048: "column cannot be null",
	1062: "duplicate key (a unique constraint)",
	1216: "foreign key: no parent row",
	1217: "foreign key: row is referenced",
	1242: "subquery returns more than one row",
	1263: "NULL for a NOT NULL column",
	1264: "out of range value",
	1265: "data truncated",
	1292: "incorrect value (date, time, number)",
	1300: "invalid character string",
	1364: "field has no default value",
	1366: "incorrect value for the column",
	1367: "illegal value",
	1406: "data too long",
	1411: "incorrect value for a function",
	1451: "foreign key: row is referenced",
	1452: "foreign key: no parent row",
	1644: "raised by a trigger or procedure (SIGNAL)",
	1690: "value out of range",
	3140: "invalid JSON text (MySQL)",
	3819: "check constraint violated (MySQL)",
	4025: "CONSTRAINT failed (MariaDB)",
}

func code(err error) uint16 {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func isContentError(err error) bool {
	_, ok := contentCodes[code(err)]
	return ok
}

// isOrderingError says whether err is a foreign key's missing parent row
// (1452, 1216): a child that may have come before its parent.
func isOrderingError(err error) bool { c := code(err); return c == 1452 || c == 1216 }

func isDeadlock(err error) bool { return code(err) == 1213 }
