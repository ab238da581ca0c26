package main

import (
	"bytes"
	"slices"
	"testing"
)

func TestPlantArg(t *testing.T) {
	tests := []struct {
		args      []string
		wantPlant string
		wantRest  []string
	}{
		{nil, "sim", nil},
		{[]string{"--json"}, "sim", []string{"--json"}},
		{[]string{"--plant", "mariadb", "--json"}, "mariadb", []string{"--json"}},
		{[]string{"--json", "-plant=mariadb"}, "mariadb", []string{"--json"}},
		{[]string{"--plant=sim", "--duration", "5m"}, "sim", []string{"--duration", "5m"}},
		{[]string{"--", "--plant", "x"}, "sim", []string{"--", "--plant", "x"}},
	}
	for _, tt := range tests {
		plant, rest := plantArg(tt.args)
		if plant != tt.wantPlant || !slices.Equal(rest, tt.wantRest) {
			t.Errorf("plantArg(%q) = %q, %q; want %q, %q", tt.args, plant, rest, tt.wantPlant, tt.wantRest)
		}
	}
}

func TestLabPlantFlag(t *testing.T) {
	tests := []struct {
		args     []string
		wantCode int
		wantOut  string
	}{
		{[]string{"step", "--plant", "oracle"}, 2, `--plant "oracle": want sim or mariadb`},
		{[]string{"compare", "--plant", "oracle"}, 2, `--plant "oracle": want sim or mariadb`},
		{[]string{"step", "--plant", "mariadb", "-h"}, 0, "usage: sluice lab step --plant mariadb"},
		{[]string{"compare", "--plant", "mariadb", "-h"}, 0, "usage: sluice lab compare --plant mariadb"},
		{[]string{"step", "--plant", "mariadb", "--dsn", ""}, 1, "no database"},
	}
	for _, tt := range tests {
		var out, errb bytes.Buffer
		code := run(append([]string{"lab"}, tt.args...), &out, &errb)
		if code != tt.wantCode || !bytes.Contains(append(out.Bytes(), errb.Bytes()...), []byte(tt.wantOut)) {
			t.Errorf("sluice lab %q = %d, %q %q; want %d and %q", tt.args, code, out.String(), errb.String(), tt.wantCode, tt.wantOut)
		}
	}
}
