package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDashboardUsage(t *testing.T) {
	tests := []struct {
		args     []string
		env      map[string]string
		code     int
		inStderr string
	}{
		{[]string{"-h"}, nil, 0, "--listen"},
		{[]string{"--listen", "0.0.0.0:8080"}, nil, 2, "not loopback"},
		{[]string{"--listen", "0.0.0.0:0", "--demo", "--speed", "0"}, map[string]string{"SLUICE_DASHBOARD_TOKEN": "t"}, 2, "--speed"},
		{[]string{"--demo", "extra"}, nil, 2, "unexpected arguments"},
		{[]string{"--listen", "nonsense"}, nil, 2, "listen address"},
		{[]string{"--no-such-flag"}, nil, 2, "not defined"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Setenv("SLUICE_DASHBOARD_TOKEN", "")
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stdout, stderr bytes.Buffer
			if code := run(append([]string{"dashboard"}, tt.args...), &stdout, &stderr); code != tt.code {
				t.Errorf("sluice dashboard %v = exit %d; want %d (stderr %q)", tt.args, code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.inStderr) {
				t.Errorf("sluice dashboard %v stderr = %q; want it to contain %q", tt.args, stderr.String(), tt.inStderr)
			}
		})
	}
}

func TestDashboardTokenFromEnvAllowsNonLoopback(t *testing.T) {
	t.Setenv("SLUICE_DASHBOARD_TOKEN", "s3cret")
	var stderr bytes.Buffer
	c, err := parseDashboard([]string{"--listen", "0.0.0.0:8080", "--demo"}, &stderr)
	if err != nil || c.token != "s3cret" {
		t.Errorf("parseDashboard with SLUICE_DASHBOARD_TOKEN = %+v, %v; want the token and no error", c, err)
	}
}
