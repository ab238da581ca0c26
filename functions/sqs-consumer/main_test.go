package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"mysql", map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(h)/d"}, ""},
		{"http", map[string]string{"SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": "http://a,http://b"}, ""},
		{"mysql secret", map[string]string{"SLUICE_MYSQL_SECRET": "arn:aws:secretsmanager:us-east-1:000000000000:secret:db"}, ""},
		{"mysql without DSN", map[string]string{}, "SLUICE_MYSQL_SECRET"},
		{"http endpoints with spaces", map[string]string{"SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": "http://a, http://b "}, ""},
		{"http endpoint not a URL", map[string]string{"SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": "a.example"}, "SLUICE_HTTP_ENDPOINTS"},
		{"unknown sink", map[string]string{"SLUICE_SINK": "kafka"}, "want mysql or http"},
		{"bad safe rate", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_SAFE_RATE": "-1"}, "SLUICE_SAFE_RATE"},
		{"bad period", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_RATE_PERIOD": "soon"}, "SLUICE_RATE_PERIOD"},
		{"bad consumers", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_CONSUMERS": "0"}, "SLUICE_CONSUMERS"},
		{"bad report", map[string]string{"SLUICE_MYSQL_DSN": "x", "SLUICE_REPORT": "maybe"}, "SLUICE_REPORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(func(k string) string { return tt.env[k] })
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("loadConfig(%v) = %v; want error containing %q", tt.env, err, tt.wantErr)
			}
		})
	}
}

// syncBuffer is a log sink shared with the emulator's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestBootstrapUnderRIE runs the real bootstrap (CGO_ENABLED=0, -tags
// lambda.norpc) under the Runtime Interface Emulator with the real SQS event
// of testdata/: the malformed record comes back as the only batch item
// failure (no DLQ configured: SQS redrive moves it), the two good ones are
// rows in MariaDB, a second delivery of the same event duplicates nothing,
// and RATE being unreadable makes the consumer use its safe rate and say so.
func TestBootstrapUnderRIE(t *testing.T) {
	ep := testenv.AWSEndpoint(t)
	dsn := mysqltest.Database(t, testenv.MySQLDSN(t))
	root, _ := filepath.Abs("../..")
	e := consumers.Env{AWSEndpoint: ep, RIE: testenv.Binary(t, "SLUICE_RIE_BIN", "aws-lambda-rie"), Root: root, WorkDir: t.TempDir(),
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	ctx := context.Background()
	bin, err := e.Build(ctx, "./functions/sqs-consumer", "bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	fn, err := e.StartRIE(ctx, bin, map[string]string{
		"SLUICE_MYSQL_DSN": dsn, "SLUICE_TABLE": fmt.Sprintf("missing-%d", os.Getpid()), "SLUICE_SAFE_RATE": "100",
	}, &logs)
	if err != nil {
		t.Fatal(err)
	}
	defer fn.Stop()
	raw, err := os.ReadFile("testdata/sqs-event.json")
	if err != nil {
		t.Fatal(err)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		t.Fatal(err)
	}
	for delivery := 1; delivery <= 2; delivery++ {
		resp, err := fn.Invoke(ctx, ev)
		if err != nil {
			t.Fatalf("delivery %d: %v\n%s", delivery, err, logs.String())
		}
		if len(resp.BatchItemFailures) != 1 || resp.BatchItemFailures[0].ItemIdentifier != "2e1424d4-f796-459a-8184-9c92662be6da" {
			t.Errorf("delivery %d: batchItemFailures = %+v; want only the malformed 2e1424d4-...", delivery, resp.BatchItemFailures)
		}
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
