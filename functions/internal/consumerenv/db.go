package consumerenv

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/sluice-dev/sluice/pkg/adapter/dsnsecret"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
)

// DB is how a consumer (Lambda or worker) reaches its MySQL database.
type DB struct {
	// DSN is SLUICE_MYSQL_DSN: a DSN or an RDS credentials document, for
	// local runs; deployments name the secret instead.
	DSN string
	// Secret is SLUICE_MYSQL_SECRET: the Secrets Manager secret (ARN or
	// name) holding the DSN or the credentials document, read at start.
	Secret string
	// Migrate is SLUICE_MIGRATE: apply the migrations at start, which needs
	// CREATE; off when they are their own deploy step (`sluice migrate`), so
	// that the runtime user needs only SELECT, INSERT and DELETE.
	Migrate bool
	// At is SLUICE_MYSQL_HOST, SLUICE_MYSQL_PORT, SLUICE_MYSQL_DATABASE:
	// where to connect when the secret does not say (an RDS-managed secret
	// holds only the username and password), or elsewhere than it says (an
	// RDS Proxy's endpoint).
	At dsnsecret.Endpoint
	// Conn is SLUICE_MYSQL_CA, SLUICE_MYSQL_TLS and the pool's caps
	// (mysqlsink.ConnFromEnv), used by every connection.
	Conn mysqlsink.Conn
}

// LoadDB reads the database's settings from getenv; migrate is
// SLUICE_MIGRATE's default (on for the Lambdas, whose template sets off;
// off for the worker) and conn the caps' defaults (mysqlsink.LambdaConn or
// WorkerConn).
func LoadDB(getenv func(string) string, migrate bool, conn mysqlsink.Conn) (DB, error) {
	d := DB{DSN: getenv("SLUICE_MYSQL_DSN"), Secret: getenv("SLUICE_MYSQL_SECRET"), Migrate: migrate,
		At: dsnsecret.Endpoint{Host: getenv("SLUICE_MYSQL_HOST"), Port: getenv("SLUICE_MYSQL_PORT"), DBName: getenv("SLUICE_MYSQL_DATABASE")}}
	if p := d.At.Port; p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return d, fmt.Errorf("SLUICE_MYSQL_PORT=%q: want a TCP port, 1 to 65535", p)
		}
	}
	switch v := getenv("SLUICE_MIGRATE"); v {
	case "":
	case "on":
		d.Migrate = true
	case "off":
		d.Migrate = false
	default:
		return d, fmt.Errorf("SLUICE_MIGRATE=%q: want on or off", v)
	}
	var err error
	if d.Conn, err = mysqlsink.ConnFromEnv(getenv, conn); err != nil {
		return d, err
	}
	if d.DSN == "" && d.Secret == "" {
		return d, fmt.Errorf("SLUICE_SINK=mysql needs SLUICE_MYSQL_SECRET (a Secrets Manager secret holding the DSN) or SLUICE_MYSQL_DSN")
	}
	return d, nil
}

// OpenMySQL opens the destination database, TLS and caps as d.Conn says:
// the DSN read from Secrets
// Manager (at start, once per container, and again after the database
// refuses its credentials: a rotation) or given in the environment, and
// the schema of prefix migrated when d.Migrate says so.
func OpenMySQL(ctx context.Context, d DB, prefix string, secrets dsnsecret.API) (*sql.DB, error) {
	conn, err := dsnsecret.Source{API: secrets, SecretID: d.Secret, Value: d.DSN, At: d.At, Prepare: d.Conn.PrepareDSN}.Connector(ctx)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	d.Conn.Limit(db)
	if d.Migrate {
		if err := mysqlsink.MigratePrefix(ctx, db, prefix); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}
