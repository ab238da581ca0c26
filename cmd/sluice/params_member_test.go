package main

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
)

func TestParamsMembers(t *testing.T) {
	store := memstore.New()
	env := paramsWith(store)
	member := []string{"set", "--loop", "orders", "destination=db", "weight=3", "min_rate=0", "max_rate=2000"}
	// The destination does not exist yet: refused with the reason.
	code, out, _ := runP(t, env, member...)
	if code != 1 || !strings.Contains(out, "destination: \"db\": no such loop") {
		t.Fatalf("set member of a missing destination = %d, %q; want 1: no such loop", code, out)
	}
	code, out, errOut := runP(t, env, "set", "--loop", "db", "setpoint=70", "kp=1", "ki=0.05", "min_rate=0",
		"max_rate=3000", "metric_dimensions=DBInstanceIdentifier=db")
	if code != 0 {
		t.Fatalf("set destination = %d, %q, %q", code, out, errOut)
	}
	if code, out, _ = runP(t, env, member...); code != 0 {
		t.Fatalf("set member = %d, %q; want 0", code, out)
	}
	tests := []struct {
		name string
		args []string
		says string
	}{
		{"a zero weight", []string{"set", "--loop", "orders", "weight=0"}, "weight: 0 must be a finite number > 0"},
		{"itself", []string{"set", "--loop", "orders", "destination=orders"}, "is the loop itself"},
		{"a cycle", []string{"set", "--loop", "db", "destination=orders", "setpoint=", "kp=", "ki=", "metric_dimensions="}, "a cycle: db → orders → db"},
		{"a controller in a member", []string{"set", "--loop", "orders", "setpoint=60"}, "belongs to the destination"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, _ := runP(t, env, tc.args...)
			if code != 1 || !strings.Contains(out, tc.says) {
				t.Errorf("%v = %d, %q; want 1 saying %q", tc.args, code, out, tc.says)
			}
		})
	}
	if code, out, _ := runP(t, env, "validate", "--loop", "orders"); code != 0 || !strings.Contains(out, "valid") {
		t.Errorf("validate member = %d, %q; want valid", code, out)
	}
	if attrs, _ := store.ReadParams(context.Background(), "orders"); attrs["weight"] != 3.0 {
		t.Errorf("weight after refused edits = %v; want 3", attrs["weight"])
	}
}
