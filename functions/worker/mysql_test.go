package main

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

func TestLoadConfigMySQL(t *testing.T) {
	file := filepath.Join(t.TempDir(), "orders.sql")
	if err := os.WriteFile(file, []byte("INSERT INTO a VALUES (:id);\nINSERT INTO b VALUES (:json.x);\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		want    mysqlsink.Config
	}{
		{"defaults", map[string]string{}, "", mysqlsink.Config{Loop: "default"}},
		{"statement", map[string]string{"SLUICE_MYSQL_STATEMENT": "INSERT INTO t VALUES (:id)", "SLUICE_MYSQL_PREFIX": "app_", "SLUICE_MYSQL_INBOX_RETENTION": "3d", "SLUICE_LOOP": "orders"}, "",
			mysqlsink.Config{Statement: "INSERT INTO t VALUES (:id)", Prefix: "app_", Retention: 72 * time.Hour, Loop: "orders"}},
		{"statement file", map[string]string{"SLUICE_MYSQL_STATEMENT_FILE": file}, "", mysqlsink.Config{Statement: "INSERT INTO a VALUES (:id);\nINSERT INTO b VALUES (:json.x);\n", Loop: "default"}},
		{"both", map[string]string{"SLUICE_MYSQL_STATEMENT": "x", "SLUICE_MYSQL_STATEMENT_FILE": file}, "not both", mysqlsink.Config{}},
		{"missing file", map[string]string{"SLUICE_MYSQL_STATEMENT_FILE": file + ".nope"}, "SLUICE_MYSQL_STATEMENT_FILE", mysqlsink.Config{}},
		{"unknown placeholder", map[string]string{"SLUICE_MYSQL_STATEMENT": "INSERT INTO t VALUES (:nope)"}, "unknown placeholder :nope", mysqlsink.Config{}},
		{"bad prefix", map[string]string{"SLUICE_MYSQL_PREFIX": "a-b"}, "SLUICE_MYSQL_PREFIX", mysqlsink.Config{}},
		{"bad retention", map[string]string{"SLUICE_MYSQL_INBOX_RETENTION": "a week"}, "SLUICE_MYSQL_INBOX_RETENTION", mysqlsink.Config{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"SLUICE_QUEUE_URL": "http://q", "SLUICE_MYSQL_DSN": "x"}
			for k, v := range tt.env {
				env[k] = v
			}
			c, err := loadConfig(func(k string) string { return env[k] })
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("loadConfig(%v) = %v; want error containing %q", tt.env, err, tt.wantErr)
			}
			if got := c.MySQL; err == nil && (got.Statement != tt.want.Statement || got.Prefix != tt.want.Prefix || got.Retention != tt.want.Retention || got.Loop != tt.want.Loop) {
				t.Errorf("loadConfig(%v).MySQL = %+v; want %+v", tt.env, c.MySQL, tt.want)
			}
		})
	}
}

// TestStatementThatCannotWorkStopsTheWorker: a statement that does not
// prepare ends run at start with the database's reason, instead of
// retrying or dead-lettering every message.
func TestStatementThatCannotWorkStopsTheWorker(t *testing.T) {
	dsn := mysqltest.Database(t, testenv.MySQLDSN(t))
	cfg, err := loadConfig(func(k string) string {
		return map[string]string{"SLUICE_QUEUE_URL": "http://127.0.0.1:1/q", "SLUICE_MYSQL_DSN": dsn, "SLUICE_METRICS_ADDR": "off",
			"SLUICE_MYSQL_STATEMENT": "INSERT INTO orders (order_id, nope) VALUES (:json.order_id, :body)"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	err = run(ctx, cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, mysqlsink.ErrStatement) || !strings.Contains(err.Error(), "doesn't exist") {
		t.Fatalf("run = %v; want ErrStatement with the database's reason", err)
	}
}
