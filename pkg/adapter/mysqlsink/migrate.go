package mysqlsink

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrate is MigratePrefix with no prefix: the tables messages,
// sluice_inbox and schema_migrations.
func Migrate(ctx context.Context, db *sql.DB) error { return MigratePrefix(ctx, db, "") }

// MigratePrefix applies the migrations shipped in this package that the
// database has not seen yet, in name order, and records each in
// <prefix>schema_migrations. It creates <prefix>messages (the default
// table) and <prefix>sluice_inbox. It takes the named lock
// <prefix>sluice_migrate so that consumers starting together apply each
// migration once. Every migration must be idempotent DDL (MySQL commits DDL
// implicitly, so a migration cannot be rolled back).
func MigratePrefix(ctx context.Context, db *sql.DB, prefix string) error {
	if !prefixRE.MatchString(prefix) {
		return fmt.Errorf("migrate: table prefix %q: want at most 32 letters, digits or underscores", prefix)
	}
	n := namesFor(prefix)
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 30)", n.lock).Scan(&got); err != nil || got.Int64 != 1 {
		return fmt.Errorf("migrate: take lock %s (got %v): %w", n.lock, got, err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", n.lock)
	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+n.migrations+` (
  version VARCHAR(255) NOT NULL PRIMARY KEY,
  applied_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))`); err != nil {
		return fmt.Errorf("migrate: create %s: %w", n.migrations, err)
	}
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return fmt.Errorf("migrate: list migrations: %w", err)
	}
	sort.Strings(files)
	for _, name := range files {
		if err := apply(ctx, conn, n.migrations, name, prefix); err != nil {
			return err
		}
	}
	return nil
}

// apply applies the migration file name unless table records it.
func apply(ctx context.Context, conn *sql.Conn, table, name, prefix string) error {
	version := strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table+" WHERE version = ?", version).Scan(&n); err != nil {
		return fmt.Errorf("migrate: check %s: %w", version, err)
	}
	if n > 0 {
		return nil
	}
	body, err := migrations.ReadFile(name)
	if err != nil {
		return fmt.Errorf("migrate: read %s: %w", name, err)
	}
	for _, stmt := range statements(strings.ReplaceAll(string(body), "{prefix}", prefix)) {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("migrate: apply %s: %w", version, err)
		}
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO "+table+" (version) VALUES (?)", version); err != nil {
		return fmt.Errorf("migrate: record %s: %w", version, err)
	}
	return nil
}

// statements splits a migration on semicolons at line ends, dropping
// comment lines.
func statements(sqlText string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(sqlText, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteString("\n")
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
