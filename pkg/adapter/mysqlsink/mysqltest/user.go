package mysqltest

import (
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Admin runs SQL with the rights to create users (CREATE USER, GRANT).
type Admin func(sql string) error

// RootSocket is the Admin of the server whose unix socket is socket ("":
// the default one, as localstack/stack/up.sh starts it): the mariadb
// client as root, which MariaDB authenticates by the process's user. It
// skips the test when that is refused (not root, or another server).
func RootSocket(t testing.TB, socket string) Admin {
	t.Helper()
	admin := SocketAdmin(socket)
	if err := admin("SELECT 1"); err != nil {
		t.Skipf("no root access to MariaDB over its socket: %v", err)
	}
	return admin
}

// SocketAdmin is RootSocket without the check, outside a test.
func SocketAdmin(socket string) Admin {
	return func(sql string) error {
		args := []string{"--no-defaults", "--protocol=socket", "-uroot", "-e", sql}
		if socket != "" {
			args = append(args, "--socket="+socket)
		}
		if out, err := exec.Command("mariadb", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("mariadb -e %q: %w: %s", sql, err, out)
		}
		return nil
	}
}

// User creates a user granted what a consumer needs at run time on dsn's
// database (SELECT, INSERT, UPDATE for the default table's upsert, DELETE:
// no DDL), identified by password and
// created with the clause require ("" or, for example, "REQUIRE SSL"); it
// is dropped when the test ends. It returns the user's name and dsn with
// that user and password.
func User(t testing.TB, admin Admin, dsn, password, require string) (string, string) {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse DSN: %v", err)
	}
	name := fmt.Sprintf("sl_u%d", time.Now().UnixNano()%1e12)
	if err := admin(fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s' %s; GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.* TO '%s'@'%%'",
		name, password, require, cfg.DBName, name)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", name)) })
	cfg.User, cfg.Passwd = name, password
	return name, cfg.FormatDSN()
}
