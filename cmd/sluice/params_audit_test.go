package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
)

// TestParamsSetAudit: an edit records who made it, when and what changed,
// in the PARAMS item and in the log line on stderr; the controller still
// reads the item.
func TestParamsSetAudit(t *testing.T) {
	store := memstore.New()
	if err := store.WriteParams(context.Background(), "orders", storetest.SampleParams("orders").Attrs(looptest.Sources())); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runP(t, paramsWith(store), "set", "--loop", "orders", "setpoint=40", "kd=")
	if code != 0 {
		t.Fatalf("set = %d, %q, %q; want 0", code, out, errOut)
	}
	attrs, _ := store.ReadParams(context.Background(), "orders")
	who, _ := testOperator(context.Background())
	if attrs["updated_by"] != who || attrs["updated_at"] == nil || attrs["updated_changes"] != "kd: 0 -> -; setpoint: 70 -> 40" {
		t.Errorf("stored audit: by %v at %v changes %q; want %s, a time, %q", attrs["updated_by"], attrs["updated_at"],
			attrs["updated_changes"], who, "kd: 0 -> -; setpoint: 70 -> 40")
	}
	if !strings.Contains(errOut, "params edit") || !strings.Contains(errOut, who) || !strings.Contains(errOut, "setpoint: 70 -> 40") {
		t.Errorf("log = %q; want the edit's line with who and what", errOut)
	}
	if !strings.Contains(out, "written by "+who) {
		t.Errorf("stdout = %q; want who wrote it", out)
	}
	if code, out, _ := runP(t, paramsWith(store), "validate", "--loop", "orders"); code != 0 {
		t.Errorf("validate after an audited edit = %d, %q; want the audit attributes ignored", code, out)
	}
}

// TestParamsSetCallerFromSTS: on the local endpoint, `sluice params set`
// records the caller's identity as STS GetCallerIdentity gives it.
func TestParamsSetCallerFromSTS(t *testing.T) {
	testenv.AWSEndpoint(t)
	ctx := context.Background()
	who, err := stsCaller(ctx)
	if err != nil || !strings.HasPrefix(who, "arn:aws:") {
		t.Fatalf("stsCaller = %q, %v; want an ARN", who, err)
	}
	client, table := ddbtest.Table(t, "sluice-audit")
	store := ddbloop.New(client, table)
	if err := store.WriteParams(ctx, "orders", storetest.SampleParams("orders").Attrs(looptest.Sources())); err != nil {
		t.Fatal(err)
	}
	env := paramsEnv{open: openDynamoStore, who: stsCaller}
	if code, out, errOut := runP(t, env, "set", "--loop", "orders", "--table", table, "setpoint=45"); code != 0 {
		t.Fatalf("set = %d, %q, %q; want 0", code, out, errOut)
	}
	attrs, err := store.ReadParams(ctx, "orders")
	if err != nil || attrs["updated_by"] != who || attrs["updated_changes"] != "setpoint: 70 -> 45" {
		t.Errorf("stored PARAMS by %v, changes %v (%v); want %s, setpoint: 70 -> 45", attrs["updated_by"], attrs["updated_changes"], err, who)
	}
}

// TestParamsGetReason: `params get` prints the last tick's reason, with
// its drain forecast.
func TestParamsGetReason(t *testing.T) {
	store := memstore.New()
	ctx := context.Background()
	if err := store.WriteParams(ctx, "orders", storetest.SampleParams("orders").Attrs(looptest.Sources())); err != nil {
		t.Fatal(err)
	}
	why := loop.Reason{Code: loop.ReasonLimited, Text: "limited by cpu: 72 % above its 70 % setpoint; backlog 1.2e+06 drains in 3 h 10 m at the allowed 105 msg/s; " +
		"the oldest message (age 22 h) expires in 2 h, before the backlog drains: raise max_rate or the retention"}
	st := loop.State{Loop: "orders", Version: 1, Reason: why, OldestAge: 22 * time.Hour, ExpiresIn: 2 * time.Hour}
	if err := store.CommitTick(ctx, loop.Commit{State: st}); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runP(t, paramsWith(store), "get", "--loop", "orders")
	if code != 0 || !strings.Contains(out, "reason: "+why.Text) {
		t.Errorf("params get = %d:\n%s\nwant the last tick's reason %q", code, out, why.Text)
	}
	code, out, _ = runP(t, paramsWith(store), "get", "--loop", "orders", "--json")
	if code != 0 || !strings.Contains(out, `"oldest_age": 79200000000000`) || !strings.Contains(out, `"expires_in": 7200000000000`) {
		t.Errorf("params get --json = %d:\n%s\nwant the oldest message's age and expiry", code, out)
	}
}
