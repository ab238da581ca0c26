package httpsink_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
)

// TestProbe: a GET of the probe path (or the endpoint) that the service
// answers with anything but 5xx, 429, 408, 401 or 403 is up; those
// answers, or none, are down; the probe POSTs nothing.
func TestProbe(t *testing.T) {
	status, path, posts := 0, "", 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			posts++
		}
		path = r.URL.Path
		w.WriteHeader(status)
	}))
	defer ts.Close()
	for _, c := range []struct {
		status    int
		probePath string
		wantPath  string
		up        bool
	}{
		{200, "", "/ingest", true}, {405, "", "/ingest", true}, {404, "/healthz", "/healthz", true},
		{503, "", "/ingest", false}, {500, "/healthz", "/healthz", false}, {429, "", "/ingest", false}, {401, "", "/ingest", false},
	} {
		status = c.status
		s := httpsink.New(httpsink.Config{ProbePath: c.probePath}, httpsink.NewRoundRobin(ts.URL+"/ingest"), nil, &noSleep{})
		err := s.Probe(context.Background())
		if (err == nil) != c.up || path != c.wantPath {
			t.Errorf("HTTP %d, probe path %q: Probe = %v on %q; want up %v on %q", c.status, c.probePath, err, path, c.up, c.wantPath)
		}
	}
	ts.Close()
	if err := httpsink.New(httpsink.Config{}, httpsink.NewRoundRobin(ts.URL), nil, &noSleep{}).Probe(context.Background()); err == nil {
		t.Error("Probe of a closed server = nil; want an error")
	}
	if posts != 0 {
		t.Errorf("the probes POSTed %d times; want none", posts)
	}
}
