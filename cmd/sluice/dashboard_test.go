package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
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
		{[]string{"--listen", "0.0.0.0:0", "--demo", "--speed", "0"}, map[string]string{"SLUICE_DASHBOARD_TOKEN": "a-token-long-enough"}, 2, "--speed"},
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
	t.Setenv("SLUICE_DASHBOARD_TOKEN", "s3cret-s3cret-s3cret")
	var stderr bytes.Buffer
	c, err := parseDashboard([]string{"--listen", "0.0.0.0:8080", "--demo"}, &stderr)
	if err != nil || c.token != "s3cret-s3cret-s3cret" {
		t.Errorf("parseDashboard with SLUICE_DASHBOARD_TOKEN = %+v, %v; want the token and no error", c, err)
	}
}

// TestDashboardTokenFileAndLength: the token comes from a file (first
// line) before the environment; a short one is refused; the command line
// has no --token.
func TestDashboardTokenFileAndLength(t *testing.T) {
	t.Setenv("SLUICE_DASHBOARD_TOKEN", "from-the-environment-1")
	file := filepath.Join(t.TempDir(), "token")
	os.WriteFile(file, []byte("from-the-file-0123456\nignored\n"), 0o600)
	var stderr bytes.Buffer
	c, err := parseDashboard([]string{"--token-file", file}, &stderr)
	if err != nil || c.token != "from-the-file-0123456" {
		t.Errorf("--token-file = %q, %v; want the file's first line", c.token, err)
	}
	t.Setenv("SLUICE_DASHBOARD_TOKEN", "short")
	if _, err := parseDashboard(nil, &stderr); err == nil || !strings.Contains(err.Error(), "at least 16") {
		t.Errorf("short token = %v; want refused", err)
	}
	if _, err := parseDashboard([]string{"--token", "from-the-command-line"}, &stderr); err == nil {
		t.Errorf("--token on the command line accepted; want it undefined")
	}
}

func TestAllowedHosts(t *testing.T) {
	tests := []struct {
		listen, flag string
		want         []string
	}{
		{"127.0.0.1:8080", "", []string{"127.0.0.1", "localhost", "127.0.0.1", "::1"}},
		{"0.0.0.0:8080", "", nil},
		{"0.0.0.0:8080", "sluice.internal, ops.example", []string{"sluice.internal", "ops.example"}},
		{"10.0.0.5:8080", "", []string{"10.0.0.5"}},
	}
	for _, tt := range tests {
		if got := allowedHosts(tt.listen, tt.flag); !slices.Equal(got, tt.want) {
			t.Errorf("allowedHosts(%q, %q) = %q; want %q", tt.listen, tt.flag, got, tt.want)
		}
	}
}

func TestDashboardHTTPServerTimeouts(t *testing.T) {
	hs := newHTTPServer(http.NotFoundHandler())
	if hs.ReadHeaderTimeout <= 0 || hs.ReadTimeout <= 0 || hs.WriteTimeout <= 0 || hs.IdleTimeout <= 0 {
		t.Errorf("timeouts read-header %v, read %v, write %v, idle %v; want all set", hs.ReadHeaderTimeout, hs.ReadTimeout, hs.WriteTimeout, hs.IdleTimeout)
	}
}
