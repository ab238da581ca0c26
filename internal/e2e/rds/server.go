package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

// The names the documented commands use, kept as they are on the
// private server.
const (
	dbName        = "orders"
	consumerUser  = "sluice_rw"
	adminPassword = "admin-pw-1"
	firstPassword = "consumer-pw-1"
	newPassword   = "consumer-pw-2"
	docHost       = "orders.cluster-abc.eu-west-1.rds.amazonaws.com:3306"
	docCA         = "/opt/rds-ca.pem"
)

// database is the private server and what the run made on it.
type database struct {
	srv  *mysqltest.TLSServer
	stop func()
	// admin reads the tables over verified TLS.
	admin *sql.DB
}

// dsn is the DSN of user with password on the run's database, TLS as
// the DSN's driver default (none).
func (d *database) dsn(user, password string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName, cfg.ParseTime = user, password, "tcp", d.srv.Addr, dbName, true
	return cfg.FormatDSN()
}

// values are the documented commands' placeholders and the run's values.
func (d *database) values(sluiceBin string) map[string]string {
	return map[string]string{docHost: d.srv.Addr, docCA: d.srv.CA, "ADMIN_PASSWORD": adminPassword,
		"CONSUMER_PASSWORD": firstPassword, "sluice migrate": sluiceBin + " migrate", "sluice mysql": sluiceBin + " mysql"}
}

// setupDatabase starts the server, makes the admin user, then runs the
// documented commands: `sluice migrate` as the admin (sh blocks), the
// consumer user and its grants (sql blocks).
func setupDatabase(ctx context.Context, f flags) (*database, error) {
	srv, stop, err := mysqltest.StartTLS()
	if err != nil {
		return nil, err
	}
	d := &database{srv: srv, stop: stop}
	admin := fmt.Sprintf("CREATE DATABASE %s; CREATE USER 'admin'@'%%' IDENTIFIED BY '%s'; GRANT ALL ON *.* TO 'admin'@'%%' WITH GRANT OPTION",
		dbName, adminPassword)
	if err := srv.Admin(admin); err != nil {
		return d, err
	}
	if d.admin, err = mysqlsink.Open(d.dsn("admin", adminPassword), mysqlsink.Conn{CA: srv.CA, MaxOpen: 2}); err != nil {
		return d, err
	}
	sluiceBin, err := filepath.Abs(f.sluice)
	if err != nil {
		return d, err
	}
	sh, err := docBlocks(f.docs, docSection, "sh")
	if err != nil {
		return d, err
	}
	for _, block := range sh {
		if !strings.Contains(block, "sluice migrate") && !strings.Contains(block, "sluice mysql") {
			continue // the Aurora item: TestAuroraLoopFollowsTheWriter runs it
		}
		cmd := exec.CommandContext(ctx, "bash", "-euc", substitute(block, d.values(sluiceBin)))
		cmd.Env = os.Environ()
		if out, err := cmd.CombinedOutput(); err != nil {
			return d, fmt.Errorf("documented command\n%s: %w: %s", block, err, out)
		}
	}
	sqlBlocks, err := docBlocks(f.docs, docSection, "sql")
	if err != nil {
		return d, err
	}
	for _, block := range sqlBlocks {
		if err := srv.Admin(substitute(block, d.values(sluiceBin))); err != nil {
			return d, fmt.Errorf("documented SQL: %w", err)
		}
	}
	return d, nil
}

// Close stops the server.
func (d *database) Close() {
	if d.admin != nil {
		d.admin.Close()
	}
	if d.stop != nil {
		d.stop()
	}
}

// checkTLS sets what the consumer user's connections show: plaintext
// refused by the server, a wrong CA refused by the client saying so, the
// right CA verified and the session encrypted; and whether the user may
// create a table.
func (d *database) checkTLS(ctx context.Context, res *Result) error {
	plain, err := sql.Open("mysql", d.dsn(consumerUser, firstPassword))
	if err != nil {
		return err
	}
	defer plain.Close()
	// MariaDB refuses a plaintext login under require_secure_transport
	// with an access error (1045) or, in later versions, its own
	// "insecure transport" error: either is the server's refusal, and the
	// same credentials must then work over TLS (below).
	perr := plain.PingContext(ctx)
	var me *mysql.MySQLError
	var required string
	if err := d.admin.QueryRowContext(ctx, "SELECT @@require_secure_transport").Scan(&required); err != nil {
		return err
	}
	res.PlaintextRefused = errors.As(perr, &me) && required == "1"

	wrong, err := mysqlsink.Open(d.dsn(consumerUser, firstPassword), mysqlsink.Conn{CA: d.srv.WrongCA})
	if err != nil {
		return err
	}
	defer wrong.Close()
	werr := wrong.PingContext(ctx)
	res.WrongCARefused = werr != nil && strings.Contains(werr.Error(), "not signed by a CA of "+d.srv.WrongCA)

	ok, err := mysqlsink.Open(d.dsn(consumerUser, firstPassword), mysqlsink.Conn{CA: d.srv.CA})
	if err != nil {
		return err
	}
	defer ok.Close()
	var name, cipher string
	if err := ok.QueryRowContext(ctx, "SHOW SESSION STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil {
		return fmt.Errorf("verified TLS connection: %w", err)
	}
	res.TLSVerified = cipher != ""
	res.PlaintextRefused = res.PlaintextRefused && res.TLSVerified
	res.CreatePrivilege, err = mayCreate(ctx, ok)
	if !res.PlaintextRefused || !res.WrongCARefused {
		return fmt.Errorf("plaintext: %v; wrong CA: %v", perr, werr)
	}
	return err
}

// mayCreate says whether db's user can create or alter a table: it tries
// both (error 1142 is the refusal) and reads its grants.
func mayCreate(ctx context.Context, db *sql.DB) (bool, error) {
	var me *mysql.MySQLError
	_, cerr := db.ExecContext(ctx, "CREATE TABLE sluice_e2e_probe (x INT)")
	_, aerr := db.ExecContext(ctx, "ALTER TABLE messages ADD COLUMN sluice_e2e_probe INT")
	for _, err := range []error{cerr, aerr} {
		if err == nil {
			return true, nil
		}
		if !errors.As(err, &me) || me.Number != 1142 {
			return false, fmt.Errorf("probe the user's DDL rights: %w", err)
		}
	}
	rows, err := db.QueryContext(ctx, "SHOW GRANTS")
	if err != nil {
		return false, err
	}
	defer rows.Close()
	for rows.Next() {
		var g string
		if err := rows.Scan(&g); err != nil {
			return false, err
		}
		if strings.Contains(g, "CREATE") || strings.Contains(g, "ALTER") || strings.Contains(g, "ALL PRIVILEGES") {
			return true, nil
		}
	}
	return false, rows.Err()
}

// ping connects anew as the consumer with password, over verified TLS.
func (d *database) ping(ctx context.Context, password string) error {
	db, err := mysqlsink.Open(d.dsn(consumerUser, password), mysqlsink.Conn{CA: d.srv.CA})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

// killConnections ends every connection of the consumer user.
func (d *database) killConnections(ctx context.Context) error {
	rows, err := d.admin.QueryContext(ctx, "SELECT id FROM information_schema.processlist WHERE user = ?", consumerUser)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		d.admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id)) // one that ended meanwhile is no error
	}
	return nil
}
