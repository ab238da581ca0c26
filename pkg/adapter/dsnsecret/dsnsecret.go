// Package dsnsecret reads a MySQL data source name from AWS Secrets Manager,
// so that a database password never sits in a function's environment or a
// CloudFormation parameter. A consumer reads it at start (once per Lambda
// container) and again, once, when the database refuses the credentials
// (a rotation): Source.Connector.
//
// The secret's SecretString is either a go-sql-driver DSN
// ("user:pass@tcp(host:3306)/db?parseTime=true") or the JSON document that
// RDS and Secrets Manager's rotation functions store
// ({"username", "password", "host", "port", "dbname"}). A secret RDS
// manages itself (named rds!db-... or rds!cluster-...) holds only the
// username and password: host, port and database then come from an
// Endpoint, which also overrides what the secret says (to connect through
// an RDS Proxy, for example).
package dsnsecret

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/go-sql-driver/mysql"
)

// API is the part of the Secrets Manager client the reader uses.
type API interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, opts ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

var _ API = (*secretsmanager.Client)(nil)

// ErrMalformed is wrapped by Read's error when the secret holds neither a
// DSN nor an RDS credentials document. The error never quotes the secret.
var ErrMalformed = errors.New("secret is neither a MySQL DSN nor an RDS credentials document")

// rdsSecret is the document RDS-managed and rotated secrets hold.
type rdsSecret struct {
	Username string          `json:"username"`
	Password string          `json:"password"`
	Host     string          `json:"host"`
	Port     json.RawMessage `json:"port"`
	DBName   string          `json:"dbname"`
}

// Endpoint is where to connect when the secret does not say, or to
// connect elsewhere than it says: each field set replaces the secret's.
type Endpoint struct {
	Host   string // host name or address (an RDS Proxy's endpoint, a cluster's writer endpoint)
	Port   string // TCP port; 3306 when neither the secret nor this sets one
	DBName string // database
}

// Read returns the DSN held by the secret secretID (its ARN or name), with
// parseTime=true set as the sinks need.
func Read(ctx context.Context, api API, secretID string) (string, error) {
	return ReadAt(ctx, api, secretID, Endpoint{})
}

// ReadAt is Read with at's host, port and database over the secret's.
func ReadAt(ctx context.Context, api API, secretID string, at Endpoint) (string, error) {
	out, err := api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secretID)})
	if err != nil {
		return "", fmt.Errorf("read MySQL secret %s: %w", secretID, err)
	}
	dsn, err := ParseAt(aws.ToString(out.SecretString), at)
	if err != nil {
		return "", fmt.Errorf("MySQL secret %s: %w", secretID, err)
	}
	return dsn, nil
}

// Parse returns the DSN of a secret's string: a DSN as it is (checked), or
// the DSN built from an RDS credentials document.
func Parse(s string) (string, error) { return ParseAt(s, Endpoint{}) }

// ParseAt is Parse with at's host, port and database over the secret's:
// a document without host (an RDS-managed secret) needs at.Host.
func ParseAt(s string, at Endpoint) (string, error) {
	s = strings.TrimSpace(s)
	var cfg *mysql.Config
	if strings.HasPrefix(s, "{") {
		var err error
		if cfg, err = parseDocument(s, at); err != nil {
			return "", err
		}
	} else {
		parsed, err := mysql.ParseDSN(s)
		if err != nil || s == "" {
			return "", ErrMalformed
		}
		cfg = parsed
		host, port, err := net.SplitHostPort(cfg.Addr)
		if err != nil {
			host, port = cfg.Addr, "3306"
		}
		if at.Host != "" || at.Port != "" {
			cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(or(at.Host, host), or(at.Port, port))
		}
		cfg.DBName = or(at.DBName, cfg.DBName)
	}
	cfg.ParseTime = true
	return cfg.FormatDSN(), nil
}

// parseDocument reads an RDS credentials document, at over its fields.
func parseDocument(s string, at Endpoint) (*mysql.Config, error) {
	var doc rdsSecret
	if err := json.Unmarshal([]byte(s), &doc); err != nil || doc.Username == "" {
		return nil, ErrMalformed
	}
	host := or(at.Host, doc.Host)
	if host == "" {
		return nil, fmt.Errorf("%w: the document has no host (an RDS-managed secret holds only the username and password): configure the host", ErrMalformed)
	}
	port := at.Port
	if port == "" {
		var err error
		if port, err = portOf(doc.Port); err != nil {
			return nil, err
		}
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.DBName = doc.Username, doc.Password, or(at.DBName, doc.DBName)
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
	return cfg, nil
}

// or returns a unless it is empty, then b.
func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// portOf reads the port of an RDS document, a number or a string; 3306
// when absent.
func portOf(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "3306", nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err == nil && n > 0 && n < 65536 {
		return strconv.Itoa(n), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65536 {
			return s, nil
		}
	}
	return "", fmt.Errorf("%w: port is not a TCP port", ErrMalformed)
}
