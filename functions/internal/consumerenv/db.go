package consumerenv

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/dsnsecret"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/rdsiam"
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
	// IAM is SLUICE_MYSQL_AUTH=iam: log in as User (SLUICE_MYSQL_USER)
	// with an IAM authentication token (rdsiam) instead of a password;
	// no secret, TLS required.
	IAM  bool
	User string
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
	switch v := getenv("SLUICE_MYSQL_AUTH"); v {
	case "", "password":
	case "iam":
		return d, d.iam(getenv)
	default:
		return d, fmt.Errorf("SLUICE_MYSQL_AUTH=%q: want password (the default: the secret's) or iam", v)
	}
	if d.DSN == "" && d.Secret == "" {
		return d, fmt.Errorf("SLUICE_SINK=mysql needs SLUICE_MYSQL_SECRET (a Secrets Manager secret holding the DSN) or SLUICE_MYSQL_DSN")
	}
	return d, nil
}

// iam checks the settings of SLUICE_MYSQL_AUTH=iam: a user, a host, TLS,
// and no password source.
func (d *DB) iam(getenv func(string) string) error {
	d.IAM, d.User = true, getenv("SLUICE_MYSQL_USER")
	switch {
	case d.DSN != "" || d.Secret != "":
		return fmt.Errorf("SLUICE_MYSQL_AUTH=iam logs in with a token: unset SLUICE_MYSQL_SECRET and SLUICE_MYSQL_DSN")
	case d.User == "" || d.At.Host == "":
		return fmt.Errorf("SLUICE_MYSQL_AUTH=iam needs SLUICE_MYSQL_USER (the database user) and SLUICE_MYSQL_HOST")
	case d.Conn.CA == "" && d.Conn.TLS == "":
		return fmt.Errorf("SLUICE_MYSQL_AUTH=iam: %w", rdsiam.ErrNoTLS)
	}
	return nil
}

// OpenMySQL opens the destination database, TLS and caps as d.Conn says:
// the DSN read from Secrets
// Manager (at start, once per container, and again after the database
// refuses its credentials: a rotation) or given in the environment, and
// the schema of prefix migrated when d.Migrate says so.
func OpenMySQL(ctx context.Context, d DB, prefix string, secrets dsnsecret.API) (*sql.DB, error) {
	src := dsnsecret.Source{API: secrets, SecretID: d.Secret, Value: d.DSN, At: d.At, Prepare: d.Conn.PrepareDSN}
	if d.IAM {
		tokens, err := d.tokens(ctx)
		if err != nil {
			return nil, err
		}
		src.Value, src.Configure = d.User+"@tcp("+tokens.Endpoint+")/"+d.At.DBName, tokens.Apply
	}
	conn, err := src.Connector(ctx)
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

// tokens are the IAM authentication tokens of d's user, signed with the
// credentials and region of the standard AWS configuration (the
// function's or the task's role).
func (d DB) tokens(ctx context.Context) (*rdsiam.Tokens, error) {
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return nil, err
	}
	port := d.At.Port
	if port == "" {
		port = "3306"
	}
	return &rdsiam.Tokens{Endpoint: net.JoinHostPort(d.At.Host, port), Region: cfg.Region, User: d.User, Credentials: cfg.Credentials}, nil
}
