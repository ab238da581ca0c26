package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
)

func paramsWith(store *memstore.Store) paramsEnv {
	return paramsEnv{open: func(context.Context, string) (paramsStore, error) { return store, nil }, who: testOperator}
}

func runP(t *testing.T, env paramsEnv, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := env.run(args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestParamsSetGetValidate(t *testing.T) {
	store := memstore.New()
	env := paramsWith(store)

	// A new loop, set attribute by attribute: refused until complete.
	code, out, _ := runP(t, env, "set", "--loop", "orders", "setpoint=70", "kp=1")
	if code != 1 || !strings.Contains(out, "min_rate") || !strings.Contains(out, "nothing written") {
		t.Fatalf("set incomplete params = %d, %q; want 1 naming min_rate, nothing written", code, out)
	}
	if _, err := store.ReadParams(context.Background(), "orders"); err == nil {
		t.Fatal("incomplete params were written")
	}
	code, out, errOut := runP(t, env, "set", "--loop", "orders", "setpoint=70", "kp=1", "ki=0.05", "min_rate=10",
		"max_rate=2000", "metric_dimensions=DBInstanceIdentifier=orders-db", "tick_period=1m")
	if code != 0 {
		t.Fatalf("set complete params = %d, %q, %q; want 0", code, out, errOut)
	}
	attrs, err := store.ReadParams(context.Background(), "orders")
	if err != nil || attrs["kp"] != 1.0 || attrs["tick_period"] != "1m" {
		t.Fatalf("stored params = %v, %v", attrs, err)
	}

	// An invalid edit is refused and the stored item stays.
	code, out, _ = runP(t, env, "set", "--loop", "orders", "setpoint=150", "min_rate=5000")
	if code != 1 || !strings.Contains(out, "setpoint") || !strings.Contains(out, "min_rate") {
		t.Errorf("set invalid = %d, %q; want 1 naming setpoint and min_rate", code, out)
	}
	if attrs, _ := store.ReadParams(context.Background(), "orders"); attrs["setpoint"] != 70.0 {
		t.Errorf("setpoint after refused edit = %v; want 70", attrs["setpoint"])
	}

	// A bad value is bad usage.
	if code, _, errOut := runP(t, env, "set", "--loop", "orders", "kp=fast"); code != 2 || !strings.Contains(errOut, "kp") {
		t.Errorf("set kp=fast = %d, %q; want 2 naming kp", code, errOut)
	}

	// Removing an attribute with name=.
	if code, _, _ := runP(t, env, "set", "--loop", "orders", "ki="); code != 0 {
		t.Errorf("set ki= = %d; want 0", code)
	}
	if attrs, _ := store.ReadParams(context.Background(), "orders"); attrs["ki"] != nil {
		t.Errorf("ki after removal = %v", attrs["ki"])
	}

	code, out, _ = runP(t, env, "validate", "--loop", "orders")
	if code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("validate = %d, %q", code, out)
	}
	code, out, _ = runP(t, env, "get", "--loop", "orders", "--json")
	if code != 0 {
		t.Fatalf("get = %d", code)
	}
	var got getOutput
	if err := json.Unmarshal([]byte(out), &got); err != nil || !got.Validity.Valid || got.Params["setpoint"] != 70.0 {
		t.Errorf("get --json = %q (%v); want valid params with setpoint 70", out, err)
	}

	// An operator's invalid item edit (not through the CLI) shows in get.
	attrs["kp"] = -1.0
	_ = store.WriteParams(context.Background(), "orders", attrs)
	code, out, _ = runP(t, env, "get", "--loop", "orders")
	if code != 0 || !strings.Contains(out, "INVALID") || !strings.Contains(out, "kp: -1") {
		t.Errorf("get of an invalid item = %d, %q; want INVALID with the kp reason", code, out)
	}
	if code, _, _ := runP(t, env, "validate", "--loop", "orders"); code != 1 {
		t.Errorf("validate of an invalid item = %d; want 1", code)
	}
}

func TestParamsValidateFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(`{"setpoint": 60, "kp": 1, "min_rate": 1, "max_rate": 100, "metric_source": "prometheus", "metric_promql": "max(cpu)"}`), 0o644)
	os.WriteFile(bad, []byte(`{"setpoint": "60", "kp": 1, "min_rate": 1, "max_rate": 100}`), 0o644)
	env := paramsWith(memstore.New())
	if code, out, _ := runP(t, env, "validate", "--file", good, "--json"); code != 0 || !strings.Contains(out, `"valid": true`) {
		t.Errorf("validate good file = %d, %q", code, out)
	}
	if code, out, _ := runP(t, env, "validate", "--file", bad); code != 1 || !strings.Contains(out, "setpoint") {
		t.Errorf("validate bad file = %d, %q", code, out)
	} // A foreign consumer's function without the queue whose deleted
	// messages are its processed rate.
	foreign := filepath.Join(dir, "foreign.json")
	os.WriteFile(foreign, []byte(`{"setpoint": 60, "kp": 1, "min_rate": 1, "max_rate": 100, "metric_source": "prometheus", "metric_promql": "max(cpu)",
		"esm_uuid": "u-1", "esm_function": "invoices-writer"}`), 0o644)
	if code, out, _ := runP(t, env, "validate", "--file", foreign); code != 1 || !strings.Contains(out, "esm_function") || !strings.Contains(out, "esm_queue") {
		t.Errorf("validate a foreign consumer without its queue = %d, %q; want esm_function refused, naming esm_queue", code, out)
	}
}

func TestParamsUsage(t *testing.T) {
	env := paramsWith(memstore.New())
	for _, args := range [][]string{{}, {"get"}, {"frob", "--loop", "x"}, {"set", "--loop", "x"}, {"get", "--loop", "x", "kp=1"}} {
		if code, _, _ := runP(t, env, args...); code != 2 {
			t.Errorf("params %q = %d; want 2", args, code)
		}
	}
	code, out, _ := runP(t, env, "--help")
	if code != 0 || !strings.Contains(out, "setpoint") || !strings.Contains(out, "tick_period") {
		t.Errorf("--help = %d, %q; want every attribute", code, out)
	}
	if code, _, errOut := runP(t, env, "get", "--loop", "missing"); code != 1 || !strings.Contains(errOut, "not found") {
		t.Errorf("get of a missing loop = %d, %q; want 1, not found", code, errOut)
	}
}

// TestParamsSamples checks the sample items in infra/params (DynamoDB JSON,
// as `aws dynamodb put-item` takes them) with the controller's validation.
func TestParamsSamples(t *testing.T) {
	files, err := filepath.Glob("../../infra/params/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no samples in infra/params: %v", err)
	}
	env := paramsWith(memstore.New())
	for _, f := range files {
		code, out, errOut := runP(t, env, "validate", "--file", f)
		if code != 0 {
			t.Errorf("validate %s = %d: %s%s", f, code, out, errOut)
		}
	}
}

// racingStore writes another operator's edit right after each read, as if
// it came between this command's read and its write.
type racingStore struct {
	*memstore.Store
}

func (s racingStore) ReadParams(ctx context.Context, id string) (map[string]any, error) {
	attrs, err := s.Store.ReadParams(ctx, id)
	if err == nil {
		other := maps.Clone(attrs)
		other["setpoint"] = 55.0
		if err := s.Store.WriteParamsIf(ctx, id, other, loop.ParamsVersion(attrs)); err != nil {
			return nil, err
		}
	}
	return attrs, err
}

// TestParamsSetConflict: an edit written between the read and the write is
// reported as a conflict, and kept.
func TestParamsSetConflict(t *testing.T) {
	store := memstore.New()
	if err := store.WriteParams(context.Background(), "orders", storetest.SampleParams("orders").Attrs(looptest.Sources())); err != nil {
		t.Fatal(err)
	}
	env := paramsEnv{open: func(context.Context, string) (paramsStore, error) { return racingStore{store}, nil }, who: testOperator}
	code, _, errOut := runP(t, env, "set", "--loop", "orders", "setpoint=40")
	if code != 3 || !strings.Contains(errOut, "conflict") {
		t.Errorf("set during another edit = %d, %q; want 3 and a conflict", code, errOut)
	}
	if attrs, _ := store.ReadParams(context.Background(), "orders"); attrs["setpoint"] != 55.0 {
		t.Errorf("setpoint = %v; want the other operator's 55 kept", attrs["setpoint"])
	}
	// Without a concurrent edit the version moves on.
	code, _, errOut = runP(t, paramsWith(store), "set", "--loop", "orders", "setpoint=40")
	if attrs, _ := store.ReadParams(context.Background(), "orders"); code != 0 || attrs["setpoint"] != 40.0 || loop.ParamsVersion(attrs) != 2 {
		t.Errorf("set = %d (%s), params %v; want setpoint 40 at edit version 2", code, errOut, attrs)
	}
}

// TestParamsGetNoDatapointYet: a loop that ticked without a datapoint says
// so instead of printing a zero time.
func TestParamsGetNoDatapointYet(t *testing.T) {
	store := memstore.New()
	ctx := context.Background()
	if err := store.WriteParams(ctx, "orders", storetest.SampleParams("orders").Attrs(looptest.Sources())); err != nil {
		t.Fatal(err)
	}
	if err := store.CommitTick(ctx, loop.Commit{State: loop.State{Loop: "orders", Version: 1, Rate: 10, TickAt: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), Mode: loop.ModeAuto}}); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runP(t, paramsWith(store), "get", "--loop", "orders")
	if code != 0 || !strings.Contains(out, "measured no datapoint yet") || strings.Contains(out, "0001-01-01") {
		t.Errorf("get = %d, %q; want \"no datapoint yet\" and no zero time", code, out)
	}
}

func testOperator(context.Context) (string, error) {
	return "arn:aws:iam::000000000000:user/test-operator", nil
}

// TestPauseResume: sluice pause sets paused on a valid loop, sluice resume
// removes it; a loop that is disabled cannot be paused (the controller's
// refusal, nothing written), and a loop without PARAMS is refused.
func TestPauseResume(t *testing.T) {
	store := memstore.New()
	env := paramsWith(store)
	if code, _, errOut := runP(t, env, "set", "--loop", "orders", "setpoint=70", "kp=1", "min_rate=10", "max_rate=2000",
		"metric_dimensions=DBInstanceIdentifier=orders-db"); code != 0 {
		t.Fatalf("set = %d, %q", code, errOut)
	}
	var out, errb bytes.Buffer
	if code := env.pause(true, []string{"--loop", "orders"}, &out, &errb); code != 0 {
		t.Fatalf("pause = %d, %q, %q; want 0", code, out.String(), errb.String())
	}
	if attrs, _ := store.ReadParams(context.Background(), "orders"); attrs[loop.AttrPaused] != true {
		t.Fatalf("after pause: PARAMS %v; want paused true", attrs)
	}
	if code, out, _ := runP(t, env, "set", "--loop", "orders", "enabled=false"); code != 1 || !strings.Contains(out, "resume it first") {
		t.Errorf("set enabled=false on a paused loop = %d, %q; want 1, refused", code, out)
	}
	out.Reset()
	if code := env.pause(false, []string{"--loop", "orders"}, &out, &errb); code != 0 {
		t.Fatalf("resume = %d, %q; want 0", code, out.String())
	}
	if attrs, _ := store.ReadParams(context.Background(), "orders"); attrs[loop.AttrPaused] != nil || attrs["setpoint"] != 70.0 {
		t.Errorf("after resume: PARAMS %v; want no paused attribute, the rest kept", attrs)
	}
	out.Reset()
	if code := env.pause(true, []string{"--loop", "nosuch"}, &out, &errb); code != 1 {
		t.Errorf("pause of a loop without PARAMS = %d, %q; want 1", code, out.String())
	}
	if code := env.pause(true, nil, &out, &errb); code != 2 {
		t.Errorf("pause without --loop = %d; want 2", code)
	}
}
