package protocheck_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/internal/protocheck"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

func rules(t *testing.T) *protocheck.Rules {
	t.Helper()
	r, err := protocheck.Load(filepath.Join(testenv.ModuleRoot(t), "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"RATE", "LEASE1", "LEASE2", "LIVE"} {
		if len(r.Items[kind]) == 0 {
			t.Fatalf("docs/protocol.md has no table for %s", kind)
		}
	}
	return r
}

// TestRulesRefuseWhatBreaksThem: an item that breaks the document's rules
// is reported by each rule it breaks.
func TestRulesRefuseWhatBreaksThem(t *testing.T) {
	r := rules(t)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	good := ddbstore.LeaseItem(protocol.Peer{Loop: "orders", Instance: "i-1", Stored: 3, StartedAt: at, ReportedAt: at, ExpiresAt: at.Add(15 * time.Second)}, 2)
	if errs := r.Check(good); len(errs) != 0 {
		t.Fatalf("Check(a lease of the Go store) = %v; want none", errs)
	}
	for _, tc := range []struct {
		name, rule string
		edit       func(protocheck.Item)
	}{
		{"stored as a string", "types", func(i protocheck.Item) { i["stored"] = &types.AttributeValueMemberS{Value: "3"} }},
		{"no expires_ms", "types", func(i protocheck.Item) { delete(i, "expires_ms") }},
		{"another loop's partition", "keys", func(i protocheck.Item) { i["pk"] = &types.AttributeValueMemberS{Value: "billing#LEASES"} }},
		{"expires_ms off", "expiry", func(i protocheck.Item) { i["expires_ms"] = &types.AttributeValueMemberN{Value: "1"} }},
		{"short ttl", "ttl", func(i protocheck.Item) { i["ttl"] = &types.AttributeValueMemberN{Value: "1"} }},
		{"batches alone", "batches", func(i protocheck.Item) { i["batches"] = &types.AttributeValueMemberN{Value: "1"} }},
		{"an undocumented attribute", "unknown", func(i protocheck.Item) { i["extra"] = &types.AttributeValueMemberS{Value: "x"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			item := protocheck.Item{}
			for k, v := range good {
				item[k] = v
			}
			tc.edit(item)
			errs := r.Check(item)
			found := false
			for _, err := range errs {
				found = found || strings.Contains(err.Error(), "rule "+tc.rule+":")
			}
			if !found {
				t.Errorf("Check(%s) = %v; want the rule %s broken", tc.name, errs, tc.rule)
			}
		})
	}
}

// TestGoStoreConforms: RATE as the controller commits it, and the leases
// and live counts of both layouts as the consumers' store writes them,
// follow docs/protocol.md.
func TestGoStoreConforms(t *testing.T) {
	testenv.AWSEndpoint(t)
	client, table := ddbtest.Table(t, "protocheck")
	ctx := context.Background()
	ctrl := ddbloop.New(client, table)
	now := time.Now().UTC()
	leases := []protocol.Peer{
		{Loop: "orders", Instance: "a1b2c3d4e5f60718", Stored: 10, StartedAt: now, ReportedAt: now, ExpiresAt: now.Add(15 * time.Second)},
		{Loop: "orders", Instance: "0718a1b2c3d4e5f6", Stored: 10, Batches: 2, BatchMessages: 10, Working: time.Second, StartedAt: now, ReportedAt: now, ExpiresAt: now.Add(15 * time.Second)},
	}
	report := func(s *ddbstore.Store) {
		t.Helper()
		for _, p := range leases {
			if err := s.ReportPeer(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
	}
	report(ddbstore.New(client, table)) // no RATE yet: layout 1
	r := protocol.Rate{Loop: "orders", PerSecond: 40, WrittenAt: now, ExpiresAt: now.Add(3 * time.Minute), Tick: 1, Weights: map[string]float64{"http://a": 1},
		Inner: &protocol.InnerSettings{Tolerance: 0.2, ReactionTime: 20 * time.Second}}
	if err := ctrl.CommitTick(ctx, loop.Commit{State: loop.State{Loop: "orders", Version: 1}, Rate: &r}); err != nil {
		t.Fatal(err)
	}
	report(ddbstore.New(client, table)) // RATE of version 2: layout 2
	checkTable(t, client, table, "RATE", "LEASE1", "LEASE2", "LIVE")
}

// TestPythonClientConforms runs the Python client's test against the
// local DynamoDB (clients/python: it reads RATE, keeps a lease in layout 2
// and counts its peers), then checks what it wrote.
func TestPythonClientConforms(t *testing.T) {
	testenv.AWSEndpoint(t)
	client, table := ddbtest.Table(t, "protocheck-py")
	root := testenv.ModuleRoot(t)
	py, err := exec.LookPath("python3")
	if err == nil {
		err = exec.Command(py, "-c", "import boto3").Run()
	}
	if err != nil {
		if testenv.Required() {
			t.Fatalf("python3 with boto3: %v (localstack/stack/up.sh installs boto3)", err)
		}
		t.Skipf("python3 with boto3: %v", err)
	}
	cmd := exec.Command(py, "-m", "unittest", "-v", "test_sluice_protocol")
	cmd.Dir = filepath.Join(root, "clients", "python")
	cmd.Env = append(os.Environ(), "SLUICE_TABLE="+table)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Python client's test: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	checkTable(t, client, table, "RATE", "LEASE2", "LIVE")
}

func checkTable(t *testing.T, client *dynamodb.Client, table string, want ...string) {
	t.Helper()
	errs, kinds, err := rules(t).CheckTable(context.Background(), client, table)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("%v", e)
	}
	for _, k := range want {
		if kinds[k] == 0 {
			t.Errorf("table %s has no %s item (checked %v); want at least one", table, k, kinds)
		}
	}
}
