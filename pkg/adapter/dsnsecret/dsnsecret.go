// Package dsnsecret reads a MySQL data source name from AWS Secrets Manager,
// so that a database password never sits in a function's environment or a
// CloudFormation parameter. A consumer reads it once, at start (once per
// Lambda container), and keeps it for the container's life.
//
// The secret's SecretString is either a go-sql-driver DSN
// ("user:pass@tcp(host:3306)/db?parseTime=true") or the JSON document that
// RDS and Secrets Manager's rotation functions store
// ({"username", "password", "host", "port", "dbname"}).
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

// Read returns the DSN held by the secret secretID (its ARN or name), with
// parseTime=true set as the sinks need.
func Read(ctx context.Context, api API, secretID string) (string, error) {
	out, err := api.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: aws.String(secretID)})
	if err != nil {
		return "", fmt.Errorf("read MySQL secret %s: %w", secretID, err)
	}
	dsn, err := Parse(aws.ToString(out.SecretString))
	if err != nil {
		return "", fmt.Errorf("MySQL secret %s: %w", secretID, err)
	}
	return dsn, nil
}

// Parse returns the DSN of a secret's string: a DSN as it is (checked), or
// the DSN built from an RDS credentials document.
func Parse(s string) (string, error) {
	s = strings.TrimSpace(s)
	var cfg *mysql.Config
	if strings.HasPrefix(s, "{") {
		var doc rdsSecret
		if err := json.Unmarshal([]byte(s), &doc); err != nil || doc.Username == "" || doc.Host == "" {
			return "", ErrMalformed
		}
		port, err := portOf(doc.Port)
		if err != nil {
			return "", err
		}
		cfg = mysql.NewConfig()
		cfg.User, cfg.Passwd, cfg.DBName = doc.Username, doc.Password, doc.DBName
		cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(doc.Host, port)
	} else {
		parsed, err := mysql.ParseDSN(s)
		if err != nil || s == "" {
			return "", ErrMalformed
		}
		cfg = parsed
	}
	cfg.ParseTime = true
	return cfg.FormatDSN(), nil
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
