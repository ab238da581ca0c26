package mysqlsink

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// TLS modes of Conn.TLS.
const (
	// TLSVerifyFull verifies the server's certificate chain against the CA
	// bundle (or the system's roots) and its name against the DSN's host.
	TLSVerifyFull = "verify-full"
	// TLSVerifyCA verifies the chain only, for a host the certificate does
	// not name (an address, a tunnel).
	TLSVerifyCA = "verify-ca"
)

// Conn is how a pool connects to MySQL: TLS, verified, and the pool's
// caps, which bound what one environment (a Lambda container, a worker
// task) holds open on the database: the sum over every environment is
// what the database (or an RDS Proxy in front of it) sees.
type Conn struct {
	// CA is a PEM file of the certificates that may sign the server's
	// (SLUICE_MYSQL_CA; for RDS and Aurora, the region's bundle from
	// their documentation). With it, TLS is verify-full unless TLS says
	// verify-ca.
	CA string
	// TLS is the mode (SLUICE_MYSQL_TLS): verify-full or verify-ca, or
	// empty: verify-full when CA is set, else the DSN's own tls setting.
	// Set, it replaces the DSN's tls (tls=preferred's plaintext fallback
	// included): a connection is TLS, verified, or none.
	TLS string

	MaxOpen     int           // SLUICE_MYSQL_MAX_OPEN: connections open at once
	MaxIdle     int           // SLUICE_MYSQL_MAX_IDLE: idle connections kept
	MaxLifetime time.Duration // SLUICE_MYSQL_CONN_LIFETIME: a connection's age before it is replaced
	MaxIdleTime time.Duration // SLUICE_MYSQL_CONN_IDLE: how long an idle connection is kept
}

// LambdaConn is the default for a Lambda environment, which stores one
// batch at a time: two connections (a Store and the inbox's pruner),
// replaced every 5 minutes (a rotated password, a failed-over writer, a
// DNS change reach every environment within that) and closed after a
// minute idle (a frozen environment holds nothing long).
func LambdaConn() Conn {
	return Conn{MaxOpen: 2, MaxIdle: 2, MaxLifetime: 5 * time.Minute, MaxIdleTime: time.Minute}
}

// WorkerConn is the default for a long-running worker: a few more
// connections, the same lifetime.
func WorkerConn() Conn {
	return Conn{MaxOpen: 4, MaxIdle: 4, MaxLifetime: 5 * time.Minute, MaxIdleTime: 5 * time.Minute}
}

// ConnFromEnv reads SLUICE_MYSQL_CA, SLUICE_MYSQL_TLS and the caps
// (SLUICE_MYSQL_MAX_OPEN, _MAX_IDLE, _CONN_LIFETIME, _CONN_IDLE) from
// getenv over def.
func ConnFromEnv(getenv func(string) string, def Conn) (Conn, error) {
	c := def
	c.CA, c.TLS = getenv("SLUICE_MYSQL_CA"), getenv("SLUICE_MYSQL_TLS")
	if c.TLS != "" && c.TLS != TLSVerifyFull && c.TLS != TLSVerifyCA {
		return c, fmt.Errorf("SLUICE_MYSQL_TLS=%q: want %s or %s", c.TLS, TLSVerifyFull, TLSVerifyCA)
	}
	for name, n := range map[string]*int{"SLUICE_MYSQL_MAX_OPEN": &c.MaxOpen, "SLUICE_MYSQL_MAX_IDLE": &c.MaxIdle} {
		if v := getenv(name); v != "" {
			x, err := strconv.Atoi(v)
			if err != nil || x < 1 {
				return c, fmt.Errorf("%s=%q: want a count >= 1", name, v)
			}
			*n = x
		}
	}
	for name, d := range map[string]*time.Duration{"SLUICE_MYSQL_CONN_LIFETIME": &c.MaxLifetime, "SLUICE_MYSQL_CONN_IDLE": &c.MaxIdleTime} {
		if v := getenv(name); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x <= 0 {
				return c, fmt.Errorf("%s=%q: want a positive duration such as 5m", name, v)
			}
			*d = x
		}
	}
	c.MaxIdle = min(c.MaxIdle, max(c.MaxOpen, 1))
	return c, nil
}

// Limit applies c's caps to db (zero: database/sql's default, unbounded).
func (c Conn) Limit(db *sql.DB) {
	db.SetMaxOpenConns(c.MaxOpen)
	db.SetMaxIdleConns(c.MaxIdle)
	db.SetConnMaxLifetime(c.MaxLifetime)
	db.SetConnMaxIdleTime(c.MaxIdleTime)
}

// PrepareDSN returns dsn with its tls parameter naming the TLS
// configuration c asks for, registered with the driver
// (mysql.RegisterTLSConfig); dsn as it is when c asks for none.
func (c Conn) PrepareDSN(dsn string) (string, error) {
	mode := c.TLS
	if mode == "" && c.CA != "" {
		mode = TLSVerifyFull
	}
	if mode == "" {
		return dsn, nil
	}
	if mode != TLSVerifyFull && mode != TLSVerifyCA {
		return "", fmt.Errorf("MySQL TLS mode %q: want %s or %s", mode, TLSVerifyFull, TLSVerifyCA)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", errors.New("the MySQL DSN does not parse") // never quote it: it holds the password
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		host = cfg.Addr
	}
	tc, err := c.tlsConfig(mode, host)
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("sluice-%x", sha256.Sum256([]byte(mode+"\x00"+c.CA+"\x00"+host)))[:23]
	if err := mysql.RegisterTLSConfig(name, tc); err != nil {
		return "", fmt.Errorf("register the MySQL TLS configuration: %w", err)
	}
	cfg.TLSConfig, cfg.TLS, cfg.AllowFallbackToPlaintext = name, nil, false
	return cfg.FormatDSN(), nil
}

// tlsConfig verifies the server's chain against the CA bundle (the
// system's roots without one) and, in verify-full, its name against host,
// with an error that names the bundle.
func (c Conn) tlsConfig(mode, host string) (*tls.Config, error) {
	var roots *x509.CertPool
	from := "the system's roots"
	if c.CA != "" {
		pem, err := os.ReadFile(c.CA)
		if err != nil {
			return nil, fmt.Errorf("MySQL CA bundle: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("MySQL CA bundle %s holds no PEM certificate", c.CA)
		}
		from = c.CA
	}
	verify := func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("MySQL server sent no certificate")
		}
		opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
		for _, ic := range cs.PeerCertificates[1:] {
			opts.Intermediates.AddCert(ic)
		}
		if mode == TLSVerifyFull {
			opts.DNSName = host
		}
		if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
			return fmt.Errorf("MySQL server certificate not signed by a CA of %s, or not for %q (TLS mode %s): %w", from, host, mode, err)
		}
		return nil
	}
	// The driver's own check is replaced by verify, which says what failed
	// in these terms; InsecureSkipVerify only hands it the chain.
	return &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: true, ServerName: host, VerifyConnection: verify}, nil
}

// Open opens a pool on dsn (a go-sql-driver DSN) connecting and capped as
// c says.
func Open(dsn string, c Conn) (*sql.DB, error) {
	dsn, err := c.PrepareDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, errors.New("the MySQL DSN does not parse")
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("MySQL connector: %w", err)
	}
	db := sql.OpenDB(conn)
	c.Limit(db)
	return db, nil
}
