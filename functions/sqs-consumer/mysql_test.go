package main

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

func TestLoadConfigMySQL(t *testing.T) {
	env := map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_LOOP": "orders", "SLUICE_MYSQL_STATEMENT": "INSERT INTO t VALUES (:id)",
		"SLUICE_MYSQL_PREFIX": "app_", "SLUICE_MYSQL_INBOX_RETENTION": "36h"}
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if m := c.MySQL; m.Statement != env["SLUICE_MYSQL_STATEMENT"] || m.Prefix != "app_" || m.Retention != 36*time.Hour || m.Loop != "orders" {
		t.Errorf("loadConfig().MySQL = %+v", m)
	}
	env["SLUICE_MYSQL_STATEMENT"] = "INSERT INTO t VALUES (?)"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "named placeholders") {
		t.Errorf("loadConfig with a positional placeholder = %v; want an error", err)
	}
}

// TestStatementThatCannotWorkStopsTheLambda: build (the function's start)
// fails with the database's reason when the statement does not prepare.
func TestStatementThatCannotWorkStopsTheLambda(t *testing.T) {
	dsn := mysqltest.Database(t, testenv.MySQLDSN(t))
	env := map[string]string{"SLUICE_MYSQL_DSN": dsn, "SLUICE_MYSQL_STATEMENT": "INSERT INTO messages (id, nope) VALUES (:id, :body)"}
	cfg, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = build(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, mysqlsink.ErrStatement) || !strings.Contains(err.Error(), "Unknown column 'nope'") {
		t.Fatalf("build = %v; want ErrStatement with the database's reason", err)
	}
}
