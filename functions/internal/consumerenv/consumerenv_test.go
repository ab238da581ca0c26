package consumerenv

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
)

func TestLoad(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"mysql", map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(h)/d"}, ""},
		{"http", map[string]string{"SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": "http://a,http://b"}, ""},
		{"http endpoint not a URL", map[string]string{"SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": "a.example"}, "SLUICE_HTTP_ENDPOINTS"},
		{"bad poison statuses", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_HTTP_POISON_STATUS": "teapot"}, "SLUICE_HTTP_POISON_STATUS"},
		{"mysql without DSN", map[string]string{}, "SLUICE_MYSQL_DSN"},
		{"unknown sink", map[string]string{"SLUICE_SINK": "kafka"}, "want mysql or http"},
		{"bad safe rate", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_SAFE_RATE": "-1"}, "SLUICE_SAFE_RATE"},
		{"bad period", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_RATE_PERIOD": "soon"}, "SLUICE_RATE_PERIOD"},
		{"bad consumers", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_CONSUMERS": "0"}, "SLUICE_CONSUMERS"},
		{"mysql secret", map[string]string{"SLUICE_MYSQL_SECRET": "arn:aws:secretsmanager:us-east-1:000000000000:secret:db"}, ""},
		{"mysql without DSN or secret", map[string]string{}, "SLUICE_MYSQL_SECRET"},
		{"http endpoints with spaces", map[string]string{"SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": "http://a, http://b "}, ""},
		{"bad report", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_REPORT": "maybe"}, "SLUICE_REPORT"},
		{"iam", map[string]string{"SLUICE_MYSQL_AUTH": "iam", "SLUICE_MYSQL_USER": "sluice_iam", "SLUICE_MYSQL_HOST": "db", "SLUICE_MYSQL_CA": "/opt/rds-ca.pem"}, ""},
		{"iam without TLS", map[string]string{"SLUICE_MYSQL_AUTH": "iam", "SLUICE_MYSQL_USER": "sluice_iam", "SLUICE_MYSQL_HOST": "db"}, "needs TLS"},
		{"iam with a secret", map[string]string{"SLUICE_MYSQL_AUTH": "iam", "SLUICE_MYSQL_USER": "u", "SLUICE_MYSQL_HOST": "db", "SLUICE_MYSQL_TLS": "verify-full", "SLUICE_MYSQL_SECRET": "s"}, "unset SLUICE_MYSQL_SECRET"},
		{"iam without user", map[string]string{"SLUICE_MYSQL_AUTH": "iam", "SLUICE_MYSQL_HOST": "db", "SLUICE_MYSQL_TLS": "verify-full"}, "SLUICE_MYSQL_USER"},
		{"unknown auth", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_MYSQL_AUTH": "kerberos"}, "SLUICE_MYSQL_AUTH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(func(k string) string { return tt.env[k] })
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Load(%v) = %v; want error containing %q", tt.env, err, tt.wantErr)
			}
		})
	}
}

func TestLoadDefaults(t *testing.T) {
	c, err := Load(func(k string) string {
		return map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_RATE_PERIOD": "3s", "SLUICE_CONSUMERS": "4"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Loop != "default" || c.Sink != "mysql" || c.SafeRate != 10 || c.RatePeriod != 3*time.Second || c.Consumers != 4 {
		t.Errorf("Load = %+v; want loop default, sink mysql, safe rate 10, period 3s, 4 consumers", c)
	}
}

// secretAPI is a Secrets Manager fake that records what it was asked.
type secretAPI struct {
	dsn   string
	asked []string
}

func (f *secretAPI) GetSecretValue(_ context.Context, in *secretsmanager.GetSecretValueInput, _ ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error) {
	f.asked = append(f.asked, aws.ToString(in.SecretId))
	return &secretsmanager.GetSecretValueOutput{SecretString: aws.String(f.dsn)}, nil
}

// TestOpenMySQLFromSecret: the DSN comes from the secret, read once; with
// SLUICE_MIGRATE=off nothing touches the database at start (its address
// here is closed), while migrating at start fails against it.
func TestOpenMySQLFromSecret(t *testing.T) {
	api := &secretAPI{dsn: "u:p@tcp(127.0.0.1:1)/d?timeout=1s"}
	c := DB{Secret: "db-secret", DSN: "ignored:x@tcp(127.0.0.1:2)/d"}
	db, err := OpenMySQL(context.Background(), c, "", api)
	if err != nil {
		t.Fatalf("OpenMySQL(migrate off) = %v; want no error", err)
	}
	db.Close()
	if len(api.asked) != 1 || api.asked[0] != "db-secret" {
		t.Errorf("secrets asked = %v; want [db-secret]", api.asked)
	}
	c.Migrate = true
	if _, err := OpenMySQL(context.Background(), c, "", api); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("OpenMySQL(migrate on) = %v; want the migration's connection error to the secret's address", err)
	}
}

// TestLoadDBEndpoint: host, port and database for a credentials document
// that holds none (an RDS-managed secret) come from the environment.
func TestLoadDBEndpoint(t *testing.T) {
	env := map[string]string{"SLUICE_MYSQL_SECRET": "rds!db-1234", "SLUICE_MYSQL_HOST": "orders.example", "SLUICE_MYSQL_PORT": "3307", "SLUICE_MYSQL_DATABASE": "orders"}
	d, err := LoadDB(func(k string) string { return env[k] }, false, mysqlsink.WorkerConn())
	if err != nil || d.At.Host != "orders.example" || d.At.Port != "3307" || d.At.DBName != "orders" {
		t.Errorf("LoadDB(%v) = %+v, %v; want the endpoint orders.example:3307/orders", env, d, err)
	}
	env["SLUICE_MYSQL_PORT"] = "70000"
	if _, err := LoadDB(func(k string) string { return env[k] }, false, mysqlsink.WorkerConn()); err == nil || !strings.Contains(err.Error(), "SLUICE_MYSQL_PORT") {
		t.Errorf("LoadDB(port 70000) = %v; want an error naming SLUICE_MYSQL_PORT", err)
	}
}
