package consumers_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestPrefillInboxRowsArePruned: the prefilled rows are in the inbox, all
// older than the retention (the pruner removes every one of them), and
// they do not collide with what a consumer stores.
func TestPrefillInboxRowsArePruned(t *testing.T) {
	ctx := context.Background()
	dsn, drop, err := mysqltest.Create(ctx, testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 250000
	if err := consumers.PrefillInbox(ctx, db, n, time.Now().Add(-mysqlsink.DefaultRetention-time.Hour), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := consumers.InboxRows(ctx, db); err != nil || got != n {
		t.Fatalf("InboxRows = %d, %v; want %d", got, err, n)
	}
	sink := mysqlsink.New(db)
	res, err := sink.Store(ctx, []consume.Message{{ID: "fresh-1", Body: []byte(`{"a":1}`)}})
	if err != nil || res[0].Outcome != consume.Stored {
		t.Fatalf("Store = %+v, %v; want stored", res, err)
	}
	removed, done, err := sink.Prune(ctx, 1000)
	if err != nil || !done || removed != n {
		t.Fatalf("Prune = %d, done %v, %v; want all %d prefilled rows", removed, done, err, n)
	}
	if got, _ := consumers.InboxRows(ctx, db); got != 1 {
		t.Errorf("inbox after the prune: %d rows; want 1 (the fresh message)", got)
	}
}
