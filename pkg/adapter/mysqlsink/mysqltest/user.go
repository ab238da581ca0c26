package mysqltest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// User creates a user on dsn's server granted what a consumer needs at run
// time on dsn's database (SELECT, INSERT, DELETE: no DDL), identified by
// password and created with the extra clause require ("" or, for example,
// "REQUIRE SSL"); it is dropped when the test ends. It returns the user's
// name and dsn with that user and password.
func User(t testing.TB, dsn, password, require string) (string, string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	admin := Conn(t, dsn)
	name := fmt.Sprintf("sl_u%d", time.Now().UnixNano()%1e12)
	ctx := context.Background()
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s' %s", name, password, require),
		fmt.Sprintf("GRANT SELECT, INSERT, DELETE ON `%s`.* TO '%s'@'%%'", cfg.DBName, name),
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	t.Cleanup(func() { dropUser(dsn, name) })
	cfg.User, cfg.Passwd = name, password
	return name, cfg.FormatDSN()
}

func dropUser(dsn, name string) {
	if db, err := sql.Open("mysql", dsn); err == nil {
		db.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", name))
		db.Close()
	}
}
