package dsnsecret

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"github.com/go-sql-driver/mysql"
)

// errAccessDenied is MySQL's ER_ACCESS_DENIED_ERROR: the user or password
// is refused, as after a rotation of the secret.
const errAccessDenied = 1045

// Source is where a consumer's DSN comes from: the secret SecretID, read
// through API, or Value (a DSN or credentials document given as it is,
// for local runs). At overrides the host, port and database of either;
// Prepare, when set, adjusts each DSN before it is used (TLS, for
// example); Configure, when set, adjusts the driver's configuration of
// each (a password computed per connection: rdsiam.Tokens.Apply).
type Source struct {
	API       API
	SecretID  string
	Value     string
	At        Endpoint
	Prepare   func(dsn string) (string, error)
	Configure func(*mysql.Config) error
}

// DSN reads the source once and returns its DSN, prepared.
func (s Source) DSN(ctx context.Context) (string, error) {
	var dsn string
	var err error
	if s.SecretID != "" {
		dsn, err = ReadAt(ctx, s.API, s.SecretID, s.At)
	} else {
		dsn, err = ParseAt(s.Value, s.At)
	}
	if err != nil || s.Prepare == nil {
		return dsn, err
	}
	return s.Prepare(dsn)
}

// Connector reads the source and returns a connector for sql.OpenDB.
// When the database refuses the credentials of a new connection (MySQL
// error 1045) and the source is a secret, it reads the secret once more
// and, when its value changed (a rotation), connects with it; the
// connections already open keep working meanwhile.
func (s Source) Connector(ctx context.Context) (*Connector, error) {
	dsn, err := s.DSN(ctx)
	if err != nil {
		return nil, err
	}
	c := &Connector{src: s}
	if err := c.use(dsn); err != nil {
		return nil, err
	}
	return c, nil
}

// Connector is a driver.Connector that follows a rotated secret.
type Connector struct {
	src Source

	mu    sync.Mutex
	dsn   string
	inner driver.Connector
}

var _ driver.Connector = (*Connector)(nil)

// use makes dsn the one new connections use.
func (c *Connector) use(dsn string) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, redacted(err))
	}
	if c.src.Configure != nil {
		if err := c.src.Configure(cfg); err != nil {
			return err
		}
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return fmt.Errorf("MySQL connector: %w", err)
	}
	c.mu.Lock()
	c.dsn, c.inner = dsn, inner
	c.mu.Unlock()
	return nil
}

func (c *Connector) current() (string, driver.Connector) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dsn, c.inner
}

// Connect opens a connection; after a 1045 it re-reads the secret once
// and retries with its new value.
func (c *Connector) Connect(ctx context.Context) (driver.Conn, error) {
	dsn, inner := c.current()
	conn, err := inner.Connect(ctx)
	var me *mysql.MySQLError
	if err == nil || c.src.SecretID == "" || !errors.As(err, &me) || me.Number != errAccessDenied {
		return conn, err
	}
	if now, _ := c.current(); now != dsn {
		return c.Connect(ctx) // another connection re-read it meanwhile
	}
	fresh, rerr := c.src.DSN(ctx)
	if rerr != nil {
		return nil, fmt.Errorf("%w (re-reading the secret after it: %v)", err, rerr)
	}
	if fresh == dsn {
		return nil, fmt.Errorf("%w (the secret %s still holds the credentials the database refuses)", err, c.src.SecretID)
	}
	if uerr := c.use(fresh); uerr != nil {
		return nil, uerr
	}
	_, inner = c.current()
	return inner.Connect(ctx)
}

// Driver returns go-sql-driver's MySQL driver.
func (c *Connector) Driver() driver.Driver { return mysql.MySQLDriver{} }

// redacted keeps an error about a DSN from quoting it: the DSN holds the
// password.
func redacted(error) string { return "the DSN does not parse" }
