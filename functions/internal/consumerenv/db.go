package consumerenv

import (
	"context"
	"database/sql"
	"fmt"

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
}

// LoadDB reads the database's settings from getenv; migrate is
// SLUICE_MIGRATE's default (on for the Lambdas, whose template sets off;
// off for the worker).
func LoadDB(getenv func(string) string, migrate bool) (DB, error) {
	d := DB{DSN: getenv("SLUICE_MYSQL_DSN"), Secret: getenv("SLUICE_MYSQL_SECRET"), Migrate: migrate}
	switch v := getenv("SLUICE_MIGRATE"); v {
	case "":
	case "on":
		d.Migrate = true
	case "off":
		d.Migrate = false
	default:
		return d, fmt.Errorf("SLUICE_MIGRATE=%q: want on or off", v)
	}
	if d.DSN == "" && d.Secret == "" {
		return d, fmt.Errorf("SLUICE_SINK=mysql needs SLUICE_MYSQL_SECRET (a Secrets Manager secret holding the DSN) or SLUICE_MYSQL_DSN")
	}
	return d, nil
}

// OpenMySQL opens the destination database: the DSN read from Secrets
// Manager (this runs once per container) or given in the environment, and
// the schema of prefix migrated when d.Migrate says so.
func OpenMySQL(ctx context.Context, d DB, prefix string, secrets dsnsecret.API) (*sql.DB, error) {
	dsn := d.DSN
	var err error
	if d.Secret != "" {
		dsn, err = dsnsecret.Read(ctx, secrets, d.Secret)
	} else {
		dsn, err = dsnsecret.Parse(dsn)
	}
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("open MySQL: %w", err)
	}
	if d.Migrate {
		if err := mysqlsink.MigratePrefix(ctx, db, prefix); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}
