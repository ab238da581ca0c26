package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"version"}, &out, &errb); code != 0 {
		t.Fatalf("sluice version = %d; want 0 (stderr %q)", code, errb.String())
	}
	if got := out.String(); !strings.HasPrefix(got, "sluice ") || len(strings.TrimSpace(got)) <= len("sluice") {
		t.Errorf("sluice version printed %q; want \"sluice <version>\"", got)
	}
	if code := run([]string{"version", "extra"}, &out, &errb); code != 2 {
		t.Errorf("sluice version extra = %d; want 2", code)
	}
}
