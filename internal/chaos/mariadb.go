package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	_ "github.com/go-sql-driver/mysql" // the MariaDB driver

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

// MariaDB is a private mariadbd with its own data directory and port, so
// that a scenario can stop it without touching the shared one.
type MariaDB struct {
	Dir  string
	Port int
	log  *os.File
	cmd  *exec.Cmd
	done chan struct{}
}

// StartMariaDB initialises a data directory under dir and starts mariadbd on
// port, with a database and a TCP user "chaos"/"chaos". The user mysql must
// be able to reach dir (its parents must not be private to root).
func StartMariaDB(ctx context.Context, dir string, port int) (*MariaDB, error) {
	m := &MariaDB{Dir: dir, Port: port}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := chownMySQL(dir); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "mariadb.log"))
	if err != nil {
		return nil, err
	}
	m.log = log
	install := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--user=mysql", "--datadir="+filepath.Join(dir, "data"), "--skip-test-db")
	install.Stdout, install.Stderr = log, log
	if err := install.Run(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db in %s: %w (log %s)", dir, err, log.Name())
	}
	if err := m.Start(ctx); err != nil {
		return nil, err
	}
	sqlText := "CREATE DATABASE IF NOT EXISTS chaos; CREATE USER IF NOT EXISTS 'chaos'@'127.0.0.1' IDENTIFIED BY 'chaos'; GRANT ALL ON *.* TO 'chaos'@'127.0.0.1';"
	cli := exec.CommandContext(ctx, "mariadb", "--no-defaults", "--socket="+m.socket(), "-uroot", "-e", sqlText)
	if out, err := cli.CombinedOutput(); err != nil {
		m.Stop()
		return nil, fmt.Errorf("create the chaos user: %w: %s", err, out)
	}
	return m, nil
}

func chownMySQL(dir string) error {
	u, err := user.Lookup("mysql")
	if err != nil {
		return fmt.Errorf("user mysql (install mariadb-server): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chown(p, uid, gid)
	})
}

func (m *MariaDB) socket() string { return filepath.Join(m.Dir, "mysqld.sock") }

// DSN is the go-sql-driver DSN of the chaos database.
func (m *MariaDB) DSN() string {
	return fmt.Sprintf("chaos:chaos@tcp(127.0.0.1:%d)/chaos?timeout=2s&readTimeout=10s&writeTimeout=10s", m.Port)
}

// Start starts mariadbd and waits until it answers.
func (m *MariaDB) Start(ctx context.Context) error {
	m.cmd = exec.Command("/usr/sbin/mariadbd", "--no-defaults", "--user=mysql", "--datadir="+filepath.Join(m.Dir, "data"),
		"--port="+strconv.Itoa(m.Port), "--bind-address=127.0.0.1", "--socket="+m.socket(),
		"--pid-file="+filepath.Join(m.Dir, "mysqld.pid"), "--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=64M")
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		return fmt.Errorf("start mariadbd on %d: %w", m.Port, err)
	}
	m.done = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { c.Wait(); close(done) }(m.cmd, m.done)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if exec.CommandContext(ctx, "mariadb-admin", "--no-defaults", "--socket="+m.socket(), "-uroot", "ping").Run() == nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("mariadbd on %d did not answer within 60 s (log %s)", m.Port, m.log.Name())
}

// Stop shuts mariadbd down cleanly (SIGTERM) and waits until it is gone.
func (m *MariaDB) Stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(60 * time.Second):
		m.cmd.Process.Kill()
		<-m.done
	}
}

// Close stops mariadbd and removes its data directory.
func (m *MariaDB) Close() {
	m.Stop()
	if m.log != nil {
		m.log.Close()
	}
	os.RemoveAll(m.Dir)
}

// Exec runs statements (a scenario's schema) in order.
func (m *MariaDB) Exec(ctx context.Context, statements ...string) error {
	if len(statements) == 0 {
		return nil
	}
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range statements {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

// Rows counts the rows stored in the sink's table (-1 when unreachable).
func (m *MariaDB) Rows(ctx context.Context) int {
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		return -1
	}
	defer db.Close()
	var n int
	if db.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages").Scan(&n) != nil {
		return -1
	}
	return n
}

// Stored returns, per seq, how many rows hold it.
func (m *MariaDB) Stored(ctx context.Context) (map[int]int, error) {
	db, err := sql.Open("mysql", m.DSN())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	bySeq, _, err := mysqltest.SeqCounts(ctx, db)
	return bySeq, err
}
