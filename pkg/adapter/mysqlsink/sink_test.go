package mysqlsink_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/consume"
)

func open(t testing.TB) *sql.DB {
	t.Helper()
	db, _ := openDSN(t)
	return db
}

// openDSN is a fresh migrated database and its DSN.
func openDSN(t testing.TB) (*sql.DB, string) {
	t.Helper()
	return mysqltest.Open(t, testenv.MySQLDSN(t))
}

func batch(from, n int) []consume.Message {
	var ms []consume.Message
	for i := from; i < from+n; i++ {
		ms = append(ms, consume.Message{ID: fmt.Sprintf("id-%d", i), Body: fmt.Appendf(nil, `{"seq":%d}`, i)})
	}
	return ms
}

func rows(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	err := retry(func() error { return db.QueryRow("SELECT COUNT(*) FROM messages").Scan(&n) })
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// retry retries f for up to 30 s: other packages' tests restart MariaDB
// (fault injection) while these run, and a database that is down is exactly
// the retryable error the consumer retries.
func retry(f func() error) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func TestMigrateIsIdempotent(t *testing.T) {
	db := open(t) // migrated once
	for range 2 {
		if err := retry(func() error { return mysqlsink.Migrate(context.Background(), db) }); err != nil {
			t.Fatalf("Migrate again: %v", err)
		}
	}
	var n int
	if err := retry(func() error { return db.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n) }); err != nil || n != 2 {
		t.Errorf("schema_migrations rows = %d, %v; want 2 (messages, inbox)", n, err)
	}
}

func TestStore(t *testing.T) {
	tests := []struct {
		name      string
		batches   [][]consume.Message
		wantRows  int
		permanent []string
	}{
		{name: "one batch", batches: [][]consume.Message{batch(0, 10)}, wantRows: 10},
		{name: "redelivery is idempotent", batches: [][]consume.Message{batch(0, 10), batch(5, 10), batch(0, 15)}, wantRows: 15},
		{name: "bad row refused alone", batches: [][]consume.Message{append(batch(0, 3), consume.Message{ID: "bad", Body: []byte("{oops")})}, wantRows: 3, permanent: []string{"bad"}},
		{name: "id too long refused alone", batches: [][]consume.Message{append(batch(0, 2), consume.Message{ID: string(make([]byte, 300)), Body: []byte("{}")})}, wantRows: 2, permanent: []string{string(make([]byte, 300))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := open(t)
			s := mysqlsink.New(db)
			var permanent []string
			for _, b := range tt.batches {
				var res []consume.Result
				err := retry(func() (err error) { res, err = s.Store(context.Background(), b); return err })
				if err != nil {
					t.Fatalf("Store: %v", err)
				}
				for i, r := range res {
					if r.Outcome == consume.Permanent {
						if r.Reason == "" {
							t.Errorf("permanent without reason")
						}
						permanent = append(permanent, b[i].ID)
					} else if r.Outcome != consume.Stored {
						t.Errorf("%s: outcome %v; want stored", b[i].ID, r.Outcome)
					}
				}
			}
			if got := rows(t, db); got != tt.wantRows {
				t.Errorf("rows = %d; want %d", got, tt.wantRows)
			}
			if fmt.Sprint(permanent) != fmt.Sprint(tt.permanent) {
				t.Errorf("permanent = %q; want %q", permanent, tt.permanent)
			}
		})
	}
}

func TestStoreDatabaseDownIsRetryable(t *testing.T) {
	db, err := sql.Open("mysql", "sluice:sluice@tcp(127.0.0.1:1)/sluice?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := mysqlsink.New(db).Store(context.Background(), batch(0, 3))
	if err == nil {
		t.Fatalf("Store on a closed port = %v, nil; want an error (retryable: nothing stored)", res)
	}
}
