package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

const checkOrders = `CREATE TABLE orders (order_id BIGINT PRIMARY KEY, customer VARCHAR(16) NOT NULL, total DECIMAL(10,2) NOT NULL, trace VARCHAR(64))`

func checkDB(t *testing.T) string {
	t.Helper()
	db, dsn := mysqltest.Open(t, testenv.MySQLDSN(t))
	if _, err := db.Exec(checkOrders); err != nil {
		t.Fatal(err)
	}
	return dsn
}

func TestMySQLCheck(t *testing.T) {
	dsn := checkDB(t)
	msg := filepath.Join(t.TempDir(), "order.json")
	if err := os.WriteFile(msg, []byte(`{"order_id": 42, "customer": "ann", "total": 12.50}`), 0o600); err != nil {
		t.Fatal(err)
	}
	upsert := "INSERT INTO orders (order_id, customer, total, trace) VALUES (:json.order_id, :json.customer, :json.total, :attr.trace) ON DUPLICATE KEY UPDATE total = VALUES(total)"
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   []string
		stderr   string
		noWrites bool
	}{
		{name: "binds a sample", args: []string{"--statement", upsert, "--message", msg, "--attr", "trace=t-1"}, code: 0,
			stdout: []string{"VALUES (?, ?, ?, ?)", "?1  :json.order_id  int64   42", `?2  :json.customer  string  "ann"`, `?3  :json.total     string  "12.50"`, `?4  :attr.trace     string  "t-1"`, "rows affected: 1 (rolled back)", "ok:"}},
		{name: "without a sample", args: []string{"--statement", upsert}, code: 0, stdout: []string{"?1  :json.order_id\n", "ok: the statement prepares"}},
		{name: "missing column", args: []string{"--statement", "INSERT INTO orders (order_id, nope) VALUES (:id, :body)"}, code: 1, stderr: "Unknown column 'nope'"},
		{name: "missing path in the sample", args: []string{"--statement", "INSERT INTO orders (order_id) VALUES (:json.customer.id)", "--message", msg}, code: 1, stderr: "would be poison"},
		{name: "data the database refuses", args: []string{"--statement", "INSERT INTO orders (order_id, customer, total) VALUES (:json.order_id, :body, 1)", "--message", msg}, code: 1, stderr: "Data too long"},
		{name: "no statement", args: nil, code: 2, stderr: "--statement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(append([]string{"mysql", "check", "--dsn", dsn}, tt.args...), &out, &errb)
			if code != tt.code || !strings.Contains(errb.String(), tt.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d with %q (stdout %s)", code, errb.String(), tt.code, tt.stderr, out.String())
			}
			for _, w := range tt.stdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	db := mysqltest.Conn(t, dsn)
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM orders").Scan(&n); err != nil || n != 0 {
		t.Errorf("orders after the checks = %d, %v; want 0 (nothing written)", n, err)
	}
}

func TestMigrateCommand(t *testing.T) {
	dsn := checkDB(t)
	var out, errb bytes.Buffer
	if code := run([]string{"migrate", "--dsn", dsn, "--prefix", "shop_"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	db := mysqltest.Conn(t, dsn)
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM shop_sluice_inbox").Scan(&n); err != nil {
		t.Errorf("shop_sluice_inbox: %v", err)
	}
	if code := run([]string{"migrate", "--dsn", dsn, "--prefix", "bad-prefix"}, &out, &errb); code != 1 {
		t.Errorf("migrate with a bad prefix exit %d; want 1", code)
	}
}
