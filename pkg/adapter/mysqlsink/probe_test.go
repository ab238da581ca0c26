package mysqlsink_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

// TestProbe: the probe answers nil on a working database and an error on
// a closed port, and stores nothing.
func TestProbe(t *testing.T) {
	dsn := mysqltest.Database(t, testenv.MySQLDSN(t))
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := mysqlsink.New(db).Probe(context.Background()); err != nil {
		t.Errorf("Probe on MariaDB = %v; want nil", err)
	}
	down, err := sql.Open("mysql", "sluice:sluice@tcp(127.0.0.1:1)/sluice?timeout=1s")
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if err := mysqlsink.New(down).Probe(context.Background()); err == nil {
		t.Error("Probe on a closed port = nil; want an error")
	}
}
