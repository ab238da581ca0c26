package mysqlsink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// Checked is what Check found for one statement of the configured text.
type Checked struct {
	// SQL is the statement as sent to the database: placeholders become ?.
	SQL string
	// Params are the statement's placeholders in order, with the values a
	// sample message binds (nil values without a sample).
	Params []Bound
	// RowsAffected is what the statement did to the sample message, before
	// the transaction was rolled back (-1 without a sample).
	RowsAffected int64
}

// Bound is one placeholder and the value bound to it.
type Bound struct {
	Placeholder string // as written, with its colon: ":json.customer.id"
	Value       any    // string, int64, uint64, bool, or nil (NULL)
}

// Check validates statement (one or more, as in Config.Statement) against
// db: it must parse, name only known placeholders and prepare. With a
// sample message it binds the parameters and runs the statements in a
// transaction that is rolled back, so nothing is written. It returns what
// it found so far along with the first error: one wrapping ErrStatement
// when the statement cannot work, the reason the sample would be poison,
// or the database's reason for refusing it.
func Check(ctx context.Context, db *sql.DB, statement string, sample *consume.Message) ([]Checked, error) {
	stmts, err := parseStatements(statement)
	if err != nil {
		return nil, err
	}
	out := make([]Checked, len(stmts))
	for i, st := range stmts {
		out[i] = Checked{SQL: st.sql, RowsAffected: -1}
		for _, p := range st.params {
			out[i].Params = append(out[i].Params, Bound{Placeholder: ":" + p.name})
		}
		p, err := db.PrepareContext(ctx, st.sql)
		if err != nil {
			return out, prepareError(i, len(stmts), st, err)
		}
		p.Close()
	}
	if sample == nil {
		return out, nil
	}
	doc := &body{raw: sample.Body}
	args := make([][]any, len(stmts))
	for i, st := range stmts {
		if args[i], err = st.bind(*sample, doc); err != nil {
			return out, fmt.Errorf("the sample message would be poison: %w", err)
		}
		for k, v := range args[i] {
			out[i].Params[k].Value = v
		}
	}
	return out, run(ctx, db, stmts, args, out)
}

// run executes the statements with args in a transaction and rolls it back.
func run(ctx context.Context, db *sql.DB, stmts []statement, args [][]any, out []Checked) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback()
	for i, st := range stmts {
		r, err := tx.ExecContext(ctx, st.sql, args[i]...)
		if err != nil {
			if isContentError(err) {
				return fmt.Errorf("MySQL would refuse the sample message (poison): statement %d: %w", i+1, err)
			}
			return fmt.Errorf("statement %d: %w", i+1, err)
		}
		out[i].RowsAffected, _ = r.RowsAffected()
	}
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return fmt.Errorf("roll back: %w", err)
	}
	return nil
}
