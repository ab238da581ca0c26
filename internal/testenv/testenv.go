// Package testenv tells integration tests where the real services are
// (moto_server, ElasticMQ, MariaDB, Kafka, Prometheus, the Lambda Runtime Interface
// Emulator). `make test` starts them with localstack/stack/up.sh and exports
// SLUICE_INTEGRATION=1, under which a missing service fails the test instead
// of skipping it: CI never passes by skipping an integration test.
package testenv

import (
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Required reports whether integration services are required
// (SLUICE_INTEGRATION=1, set by `make test`).
func Required() bool { return os.Getenv("SLUICE_INTEGRATION") == "1" }

// unavailable skips the test, or fails it when services are required.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if Required() {
		t.Fatalf("integration service unavailable (SLUICE_INTEGRATION=1): "+format, args...)
	}
	t.Skipf("integration service unavailable (run `make test` to start it): "+format, args...)
}

func dial(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// AWSEndpoint returns the local AWS endpoint (moto_server or LocalStack),
// from AWS_ENDPOINT_URL, after checking that it answers.
func AWSEndpoint(t testing.TB) string {
	t.Helper()
	return endpoint(t, "AWS_ENDPOINT_URL")
}

// SQSEndpoint returns the local SQS endpoint, after checking that it
// answers: AWS_ENDPOINT_URL_SQS (ElasticMQ under `make test`; moto_server
// under SLUICE_SQS=moto), else AWS_ENDPOINT_URL, the same choice the AWS SDK
// makes for an SQS client. A test of SQS calls it (as well as AWSEndpoint
// when it also uses DynamoDB or CloudWatch).
func SQSEndpoint(t testing.TB) string {
	t.Helper()
	if os.Getenv("AWS_ENDPOINT_URL_SQS") != "" {
		return endpoint(t, "AWS_ENDPOINT_URL_SQS")
	}
	return endpoint(t, "AWS_ENDPOINT_URL")
}

// endpoint returns the URL in the environment variable env after checking
// that its host answers.
func endpoint(t testing.TB, env string) string {
	t.Helper()
	ep := os.Getenv(env)
	if ep == "" {
		unavailable(t, "%s is not set", env)
		return ""
	}
	u, err := url.Parse(ep)
	if err != nil {
		t.Fatalf("%s %q: %v", env, ep, err)
	}
	if err := dial(u.Host); err != nil {
		unavailable(t, "%s %s: %v", env, ep, err)
	}
	return ep
}

// MySQLDSN returns the go-sql-driver DSN of the test MariaDB (SLUICE_MYSQL_DSN),
// after checking that its port answers.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("SLUICE_MYSQL_ADDR")
	if addr == "" {
		addr = "127.0.0.1:3306"
	}
	return answering(t, "SLUICE_MYSQL_DSN", "MariaDB", addr)
}

// KafkaBrokers returns the seed broker of the real Kafka broker
// (SLUICE_KAFKA_BROKERS), after checking that it answers.
func KafkaBrokers(t testing.TB) string {
	t.Helper()
	return answering(t, "SLUICE_KAFKA_BROKERS", "Kafka", "")
}

// answering returns the value of the environment variable env after
// checking that the service (what) answers at addr, or at the value itself
// when addr is empty.
func answering(t testing.TB, env, what, addr string) string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		unavailable(t, "%s is not set", env)
		return ""
	}
	if addr == "" {
		addr = v
	}
	if err := dial(addr); err != nil {
		unavailable(t, "%s at %s: %v", what, addr, err)
	}
	return v
}

// Binary returns the path of an executable named by the environment variable
// env (for example SLUICE_PROMETHEUS_BIN, SLUICE_RIE_BIN, SLUICE_CHROMIUM_BIN),
// falling back to a lookup of name in PATH.
func Binary(t testing.TB, env, name string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
		unavailable(t, "%s=%s does not exist", env, p)
		return ""
	}
	p, err := exec.LookPath(name)
	if err != nil {
		unavailable(t, "%s not set and %s not in PATH", env, name)
		return ""
	}
	return p
}

// ModuleRoot returns the directory of the module's go.mod, the nearest
// above the test's working directory.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatalf("no go.mod above the test's directory")
		}
		dir = parent
	}
}
