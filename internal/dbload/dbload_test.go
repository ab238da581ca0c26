package dbload

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/consume"
)

func openTestDB(t *testing.T) *sql.DB {
	t.Helper()
	db, _ := mysqltest.Open(t, testenv.MySQLDSN(t))
	return db
}

// TestWorkload stores messages through the consumers' sink and checks that
// the trigger did its work once per stored message (also for a redelivery,
// which inserts nothing), and that Install is idempotent.
func TestWorkload(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	w := Workload{DataRows: 5000, ScanRows: 1000}
	for range 2 {
		if err := Install(ctx, db, w); err != nil {
			t.Fatalf("Install: %v", err)
		}
	}
	sink := mysqlsink.New(db)
	var msgs []consume.Message
	for i := range 25 {
		msgs = append(msgs, consume.Message{ID: fmt.Sprintf("m-%d", i), Body: []byte(fmt.Sprintf(`{"seq":%d}`, i))})
	}
	for _, batch := range [][]consume.Message{msgs[:10], msgs[10:], msgs[5:15]} { // the last is a redelivery
		if _, err := sink.Store(ctx, batch); err != nil {
			t.Fatalf("Store: %v", err)
		}
	}
	var data, events, totalN int
	var amount float64
	if err := db.QueryRow("SELECT COUNT(*) FROM dbload_data").Scan(&data); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT COUNT(*), COALESCE(SUM(amount), 0) FROM dbload_events").Scan(&events, &amount); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT COALESCE(SUM(n), 0) FROM dbload_totals").Scan(&totalN); err != nil {
		t.Fatal(err)
	}
	if data != 5000 || events != 25 || totalN != 25 || amount <= 0 {
		t.Errorf("dbload_data %d rows, dbload_events %d rows (amount %v), totals n %d; want 5000, 25 (> 0), 25", data, events, amount, totalN)
	}
	// The aggregate of one message reads ScanRows rows: its amount is the
	// sum of 1000 values in [0, 1).
	var lo, hi float64
	if err := db.QueryRow("SELECT MIN(amount), MAX(amount) FROM dbload_events").Scan(&lo, &hi); err != nil {
		t.Fatal(err)
	}
	if lo < 300 || hi > 700 {
		t.Errorf("aggregate amounts in [%v, %v]; want sums of 1000 values in [0,1), about 500", lo, hi)
	}
	if err := Uninstall(ctx, db); err != nil {
		t.Fatal(err)
	}
}

func TestLoadGenerator(t *testing.T) {
	db := openTestDB(t)
	ctx := context.Background()
	if err := Install(ctx, db, Workload{DataRows: 5000, ScanRows: 1000}); err != nil {
		t.Fatal(err)
	}
	g := &LoadGenerator{DB: db, Rate: 200, ScanRows: 1000, DataRows: 5000}
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx); err == nil {
		t.Errorf("second Start: no error; want already running")
	}
	for i := 0; i < 2000; i++ { // at most 10 s
		if done, _ := g.Queries(); done >= 20 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.Stop()
	done, failed := g.Queries()
	if failed != 0 || g.Running() {
		t.Errorf("load generator: %d done, %d failed, running %v after Stop; want no failure, stopped", done, failed, g.Running())
	}
	if err := (&LoadGenerator{DB: db}).Start(ctx); err == nil {
		t.Errorf("Start with rate 0: no error")
	}
}
