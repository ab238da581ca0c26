package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// runJSON runs `sluice args...`, wants exit status 0, decodes the output
// into v and returns it.
func runJSON(t *testing.T, v any, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := run(args, &out, &errb); code != 0 {
		t.Fatalf("sluice %s = exit %d; want 0 (stderr %s)", strings.Join(args, " "), code, errb.String())
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		t.Fatalf("sluice %s: output %q is not JSON: %v", strings.Join(args, " "), out.String(), err)
	}
	return out.String()
}
