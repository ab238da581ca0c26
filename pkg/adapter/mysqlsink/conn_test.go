package mysqlsink_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestTLSVerified: against a MariaDB that requires TLS on a certificate
// of a CA the test made, with a user REQUIRE SSL granted only SELECT,
// INSERT, UPDATE and DELETE: plaintext is refused, a wrong CA is refused saying
// so, and the right CA stores.
func TestTLSVerified(t *testing.T) {
	testenv.MySQLDSN(t) // skips, like the other integration tests, unless asked for
	srv := mysqltest.StartTLSServer(t)
	if err := srv.Admin("CREATE DATABASE tlsdb; CREATE USER 'adm'@'%' IDENTIFIED BY 'adm'; GRANT ALL ON *.* TO 'adm'@'%'"); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	verified := mysqlsink.Conn{CA: srv.CA}
	open := func(c mysqlsink.Conn, dsn string) *sql.DB {
		t.Helper()
		db, err := mysqlsink.Open(dsn, c)
		if err != nil {
			t.Fatalf("Open(%+v): %v", c, err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	if err := mysqlsink.MigratePrefix(ctx, open(verified, fmt.Sprintf("adm:adm@tcp(%s)/tlsdb?parseTime=true", srv.Addr)), ""); err != nil {
		t.Fatalf("migrate over TLS: %v", err)
	}
	_, dsn := mysqltest.User(t, srv.Admin, fmt.Sprintf("adm:adm@tcp(%s)/tlsdb", srv.Addr), "app-pw", "REQUIRE SSL")

	if err := open(mysqlsink.Conn{}, dsn).PingContext(ctx); err == nil {
		t.Error("plaintext connection succeeded; want the server to refuse it")
	}
	err := open(mysqlsink.Conn{CA: srv.WrongCA}, dsn).PingContext(ctx)
	if err == nil || !strings.Contains(err.Error(), srv.WrongCA) || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("connection with the wrong CA = %v; want an error naming the CA file and the unsigned certificate", err)
	}
	err = open(mysqlsink.Conn{CA: srv.CA, TLS: "verify-full"}, strings.Replace(dsn, "127.0.0.1", "localhost", 1)+"?tls=preferred").PingContext(ctx)
	if err != nil {
		t.Errorf("verify-full on localhost (in the certificate) = %v; want it to connect", err)
	}

	db := open(verified, dsn)
	sink, err := mysqlsink.Prepare(ctx, db, mysqlsink.Config{})
	if err != nil {
		t.Fatalf("Prepare over TLS: %v", err)
	}
	res, err := sink.Store(ctx, []consume.Message{{ID: "m1", Body: []byte(`{"a":1}`)}})
	if err != nil || len(res) != 1 || res[0].Outcome != consume.Stored {
		t.Fatalf("Store over TLS = %+v, %v; want stored", res, err)
	}
	var cipher, name string
	if err := db.QueryRowContext(ctx, "SHOW STATUS LIKE 'Ssl_cipher'").Scan(&name, &cipher); err != nil || cipher == "" {
		t.Errorf("Ssl_cipher = %q, %v; want a TLS session", cipher, err)
	}
}

func TestConnTLSModes(t *testing.T) {
	for _, c := range []mysqlsink.Conn{{TLS: "maybe"}, {CA: "/nonexistent/ca.pem"}} {
		if _, err := c.PrepareDSN("u:p@tcp(db:3306)/app"); err == nil {
			t.Errorf("PrepareDSN with %+v = nil; want an error", c)
		}
	}
	got, err := mysqlsink.Conn{}.PrepareDSN("u:p@tcp(db:3306)/app?tls=preferred")
	if err != nil || !strings.Contains(got, "tls=preferred") {
		t.Errorf("PrepareDSN without TLS settings = %q, %v; want the DSN as it is", got, err)
	}
	got, err = mysqlsink.Conn{TLS: "verify-full"}.PrepareDSN("u:p@tcp(db:3306)/app?tls=preferred")
	if err != nil || strings.Contains(got, "preferred") || !strings.Contains(got, "tls=sluice-") {
		t.Errorf("PrepareDSN(verify-full over tls=preferred) = %q, %v; want the registered config, no plaintext fallback", got, err)
	}
}

func TestConnFromEnvCaps(t *testing.T) {
	env := map[string]string{"SLUICE_MYSQL_MAX_OPEN": "3", "SLUICE_MYSQL_CONN_LIFETIME": "2m"}
	c, err := mysqlsink.ConnFromEnv(func(k string) string { return env[k] }, mysqlsink.LambdaConn())
	if err != nil || c.MaxOpen != 3 || c.MaxIdle != 2 || c.MaxLifetime != 2*time.Minute || c.MaxIdleTime != time.Minute {
		t.Errorf("ConnFromEnv(%v) = %+v, %v; want max open 3, idle 2, lifetime 2m, idle time 1m", env, c, err)
	}
	if d := mysqlsink.LambdaConn(); d.MaxOpen < 1 || d.MaxOpen > 4 || d.MaxLifetime <= 0 {
		t.Errorf("LambdaConn() = %+v; want a few connections with a lifetime", d)
	}
	for k, v := range map[string]string{"SLUICE_MYSQL_MAX_OPEN": "0", "SLUICE_MYSQL_CONN_IDLE": "soon", "SLUICE_MYSQL_TLS": "maybe"} {
		if _, err := mysqlsink.ConnFromEnv(func(n string) string { return map[string]string{k: v}[n] }, mysqlsink.WorkerConn()); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("ConnFromEnv(%s=%s) = %v; want an error naming it", k, v, err)
		}
	}
	db, err := mysqlsink.Open("u:p@tcp(127.0.0.1:1)/d", mysqlsink.Conn{MaxOpen: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got := db.Stats().MaxOpenConnections; got != 3 {
		t.Errorf("Open(MaxOpen 3): MaxOpenConnections = %d; want 3", got)
	}
}
