package httpsink_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// statusServer answers every request with status (a 302 points at /landing,
// which answers 200 to any method: a client following it would "store").
func statusServer(t *testing.T, status int) (*httptest.Server, *atomic.Int64) {
	var landed atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/landing", func(w http.ResponseWriter, r *http.Request) {
		landed.Add(1)
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if status >= 300 && status < 400 {
			http.Redirect(w, r, "/landing", status)
			return
		}
		http.Error(w, "answer "+http.StatusText(status), status)
	})
	ts := httptest.NewServer(mux)
	t.Cleanup(ts.Close)
	return ts, &landed
}

// TestStatusSemantics: only 400, 413, 415 and 422 are the message's fault;
// every other failure (3xx never followed, 401, 403, 404, 408, 409, 425,
// 429, 5xx) is the destination's and is retried.
func TestStatusSemantics(t *testing.T) {
	poison := []int{400, 413, 415, 422}
	for _, status := range []int{301, 302, 303, 307, 308, 400, 401, 403, 404, 405, 408, 409, 410, 413, 415, 422, 425, 429, 500, 502, 503, 504} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			ts, landed := statusServer(t, status)
			s := httpsink.New(httpsink.Config{Attempts: 2}, httpsink.NewRoundRobin(ts.URL), nil, &noSleep{})
			res, err := s.Store(context.Background(), []consume.Message{{ID: "m", Body: []byte(`{}`)}})
			if err != nil {
				t.Fatalf("Store: %v", err)
			}
			want := consume.Retryable
			if slices.Contains(poison, status) {
				want = consume.Permanent
			}
			if res[0].Outcome != want {
				t.Errorf("HTTP %d: outcome %v (%s); want %v", status, res[0].Outcome, res[0].Reason, want)
			}
			if !strings.Contains(res[0].Reason, http.StatusText(status)) && !strings.Contains(res[0].Reason, "HTTP") {
				t.Errorf("HTTP %d: reason %q names no status", status, res[0].Reason)
			}
			if landed.Load() != 0 {
				t.Errorf("HTTP %d: the client followed the redirect %d times", status, landed.Load())
			}
		})
	}
}

func TestPoisonStatusConfigurable(t *testing.T) {
	ts, _ := statusServer(t, http.StatusConflict)
	s := httpsink.New(httpsink.Config{Attempts: 1, PoisonStatus: []int{409}}, httpsink.NewRoundRobin(ts.URL), nil, &noSleep{})
	res, _ := s.Store(context.Background(), []consume.Message{{ID: "m", Body: []byte(`{}`)}})
	if res[0].Outcome != consume.Permanent {
		t.Errorf("409 with PoisonStatus [409]: %v; want permanent", res[0].Outcome)
	}
	ts400, _ := statusServer(t, http.StatusBadRequest)
	s = httpsink.New(httpsink.Config{Attempts: 1, PoisonStatus: []int{409}}, httpsink.NewRoundRobin(ts400.URL), nil, &noSleep{})
	res, _ = s.Store(context.Background(), []consume.Message{{ID: "m", Body: []byte(`{}`)}})
	if res[0].Outcome != consume.Retryable {
		t.Errorf("400 with PoisonStatus [409]: %v; want retryable", res[0].Outcome)
	}
}

func TestRetryAfterHonouredOn503(t *testing.T) {
	mux := http.NewServeMux()
	var n atomic.Int64
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
	})
	ts := httptest.NewServer(mux)
	defer ts.Close()
	clk := &noSleep{}
	s := httpsink.New(httpsink.Config{}, httpsink.NewRoundRobin(ts.URL), nil, clk)
	res, _ := s.Store(context.Background(), []consume.Message{{ID: "m", Body: []byte(`{}`)}})
	if res[0].Outcome != consume.Stored || len(clk.waits) != 1 || clk.waits[0] != time.Second {
		t.Errorf("503 Retry-After 1 then 200: %v after waits %v; want stored after one 1s wait", res[0].Outcome, clk.waits)
	}
}

func TestParseEndpoints(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"http://a:1/x, http://b:2/y", []string{"http://a:1/x", "http://b:2/y"}, false},
		{" http://a/ ,,\thttp://b/\n", []string{"http://a/", "http://b/"}, false},
		{"", nil, true},
		{" , ", nil, true},
		{"a.example/x", nil, true},
		{"ftp://a/x", nil, true},
	}
	for _, tt := range tests {
		got, err := httpsink.ParseEndpoints(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("ParseEndpoints(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseStatuses(t *testing.T) {
	got, err := httpsink.ParseStatuses(" 400, 422 ,")
	if err != nil || !slices.Equal(got, []int{400, 422}) {
		t.Errorf("ParseStatuses = %v, %v; want [400 422]", got, err)
	}
	for _, bad := range []string{"503", "4x", "302"} {
		if _, err := httpsink.ParseStatuses(bad); err == nil {
			t.Errorf("ParseStatuses(%q) = nil error; want one", bad)
		}
	}
}

func TestContentDigestSent(t *testing.T) {
	var got string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Get("Content-Digest") }))
	defer ts.Close()
	s := httpsink.New(httpsink.Config{}, httpsink.NewRoundRobin(ts.URL), nil, &noSleep{})
	s.Store(context.Background(), []consume.Message{{ID: "m", Body: []byte(`{}`)}})
	// sha-256 of "{}"
	if want := "sha-256=:RBNvo1WzZ4oRRq0W9+hknpT7T8If536DEMBg9hyq/4o=:"; got != want {
		t.Errorf("Content-Digest %q; want %q", got, want)
	}
}
