package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/functions/internal/functest"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/internal/testfile"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
)

// TestLoadConfig checks the function's own settings; the shared ones are
// consumerenv's (TestLoad there).
func TestLoadConfig(t *testing.T) {
	env := map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(h)/d", "SLUICE_DLQ_URL": "http://sqs/dlq", "SLUICE_QUEUE_URL": "http://sqs/q"}
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil || c.DeadLetterURL != env["SLUICE_DLQ_URL"] || c.QueueURL != env["SLUICE_QUEUE_URL"] || c.Loop != "default" {
		t.Errorf("loadConfig(%v) = %+v, %v; want its DLQ and queue URLs, loop default", env, c, err)
	}
	env["SLUICE_SAFE_RATE"] = "-1"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "SLUICE_SAFE_RATE") {
		t.Errorf("loadConfig with SLUICE_SAFE_RATE=-1 = %v; want an error naming it", err)
	}
}

func TestLoadConfigMySQL(t *testing.T) {
	env := map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_LOOP": "orders", "SLUICE_MYSQL_STATEMENT": "INSERT INTO t VALUES (:id)",
		"SLUICE_MYSQL_PREFIX": "app_", "SLUICE_MYSQL_INBOX_RETENTION": "36h"}
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if m := c.MySQL; m.Statement != env["SLUICE_MYSQL_STATEMENT"] || m.Prefix != "app_" || m.Retention != 36*time.Hour || m.Loop != "orders" {
		t.Errorf("loadConfig().MySQL = %+v", m)
	}
	env["SLUICE_MYSQL_STATEMENT"] = "INSERT INTO t VALUES (?)"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "named placeholders") {
		t.Errorf("loadConfig with a positional placeholder = %v; want an error", err)
	}
}

// TestStatementThatCannotWorkStopsTheLambda: build (the function's start)
// fails with the database's reason when the statement does not prepare.
func TestStatementThatCannotWorkStopsTheLambda(t *testing.T) {
	dsn := mysqltest.Database(t, testenv.MySQLDSN(t))
	env := map[string]string{"SLUICE_MYSQL_DSN": dsn, "SLUICE_MYSQL_STATEMENT": "INSERT INTO messages (id, nope) VALUES (:id, :body)"}
	cfg, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = build(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if !errors.Is(err, mysqlsink.ErrStatement) || !strings.Contains(err.Error(), "Unknown column 'nope'") {
		t.Fatalf("build = %v; want ErrStatement with the database's reason", err)
	}
}

// TestBootstrapUnderRIE runs the real bootstrap (CGO_ENABLED=0, -tags
// lambda.norpc) under the Runtime Interface Emulator with the real SQS event
// of testdata/: the malformed record comes back as the only batch item
// failure (no DLQ configured: SQS redrive moves it), the two good ones are
// rows in MariaDB, a second delivery of the same event duplicates nothing,
// and RATE being unreadable makes the consumer use its safe rate and say so.
func TestBootstrapUnderRIE(t *testing.T) {
	testenv.AWSEndpoint(t)
	dsn := mysqltest.Database(t, testenv.MySQLDSN(t))
	ctx := context.Background()
	fn, logs := functest.Bootstrap(ctx, t, "./functions/sqs-consumer", "", map[string]string{
		"SLUICE_MYSQL_DSN": dsn, "SLUICE_TABLE": fmt.Sprintf("missing-%d", os.Getpid()), "SLUICE_SAFE_RATE": "100",
	})
	ev := testfile.JSON[events.SQSEvent](t, "testdata/sqs-event.json")
	for delivery := 1; delivery <= 2; delivery++ {
		resp, err := fn.Invoke(ctx, ev)
		if err != nil {
			t.Fatalf("delivery %d: %v\n%s", delivery, err, logs.String())
		}
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "2e1424d4-f796-459a-8184-9c92662be6da" {
			t.Errorf("delivery %d: batchItemFailures = %+v; want only the malformed 2e1424d4-...", delivery, resp.BatchItemFailures)
		}
	}
	db := mysqltest.Conn(t, dsn)
	var n int
	var ids string
	if err := db.QueryRow("SELECT COUNT(*), GROUP_CONCAT(id ORDER BY id) FROM messages").Scan(&n, &ids); err != nil {
		t.Fatal(err)
	}
	if n != 2 || ids != "059f36b4-87a3-44ab-83d2-661975830a7d,c80e8021-a70a-42c7-a470-796e1186f753" {
		t.Errorf("rows = %d (%s); want the 2 good messages once", n, ids)
	}
	out := logs.String()
	for _, want := range []string{`"msg":"using safe rate"`, `"msg":"poison message"`, `"_aws"`} {
		if !strings.Contains(out, want) {
			t.Errorf("bootstrap output lacks %s", want)
		}
	}
}

// TestLoadConfigBackoffs: the visibilities of what is handed back default
// to 30 s (a failed store) and 4 min (an open circuit), and can be set.
func TestLoadConfigBackoffs(t *testing.T) {
	env := map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(h)/d"}
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil || c.RetryBackoff.Base != 30*time.Second || c.OpenBackoff.Base != 4*time.Minute {
		t.Errorf("defaults: retry %v, open %v, %v; want 30s, 4m", c.RetryBackoff, c.OpenBackoff, err)
	}
	env["SLUICE_RETRY_BACKOFF"], env["SLUICE_OPEN_BACKOFF"] = "2s", "16s"
	if c, err = loadConfig(func(k string) string { return env[k] }); err != nil || c.RetryBackoff.Base != 2*time.Second || c.OpenBackoff.Base != 16*time.Second {
		t.Errorf("set: retry %v, open %v, %v; want 2s, 16s", c.RetryBackoff, c.OpenBackoff, err)
	}
	env["SLUICE_OPEN_BACKOFF"] = "-1s"
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "SLUICE_OPEN_BACKOFF") {
		t.Errorf("SLUICE_OPEN_BACKOFF=-1s: %v; want an error naming it", err)
	}
}

// TestLoadConfigMaxRequeues: SLUICE_MAX_REQUEUES sets how often a message
// is requeued (default sqsqueue.DefaultMaxRequeues), off never.
func TestLoadConfigMaxRequeues(t *testing.T) {
	for v, want := range map[string]int{"": sqsqueue.DefaultMaxRequeues, "4": 4, "off": -1} {
		env := map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(h)/d", "SLUICE_MAX_REQUEUES": v}
		if c, err := loadConfig(func(k string) string { return env[k] }); err != nil || c.MaxRequeues != want {
			t.Errorf("SLUICE_MAX_REQUEUES=%q: %d, %v; want %d", v, c.MaxRequeues, err, want)
		}
	}
	env := map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(h)/d", "SLUICE_MAX_REQUEUES": "0"}
	if _, err := loadConfig(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "SLUICE_MAX_REQUEUES") {
		t.Errorf("SLUICE_MAX_REQUEUES=0: %v; want an error naming it", err)
	}
}
