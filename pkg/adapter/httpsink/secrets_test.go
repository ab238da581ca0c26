package httpsink_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestSinkReasonsHoldNoCredentials: the URL's userinfo and query values
// never appear in a message's reason (poison, retried, unreachable), which
// ends in logs and dead-letter queues.
func TestSinkReasonsHoldNoCredentials(t *testing.T) {
	codes := map[string]int{"poison": 400, "down": 503}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := make([]byte, 16)
		n, _ := r.Body.Read(buf)
		w.WriteHeader(codes[string(buf[:n])])
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for _, tt := range []struct{ name, base, body string }{
		{"poison", srv.URL, "poison"},
		{"retried", srv.URL, "down"},
		{"unreachable", closed.URL, "down"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			endpoint := strings.Replace(tt.base, "http://", "http://svc:s3cr3t-pw@", 1) + "/orders?token=t0k3n&region=eu"
			s := httpsink.New(httpsink.Config{Attempts: 2}, httpsink.NewRoundRobin(endpoint), nil, &noSleep{})
			res, _ := s.Store(context.Background(), []consume.Message{{ID: "m-1", Body: []byte(tt.body)}})
			r := res[0].Reason
			if r == "" || strings.Contains(r, "s3cr3t-pw") || strings.Contains(r, "t0k3n") || strings.Contains(r, "svc:") {
				t.Errorf("reason %q; want one that names the endpoint without its credentials", r)
			}
			if !strings.Contains(r, "/orders") {
				t.Errorf("reason %q; want the endpoint's host and path", r)
			}
		})
	}
}

// TestSinkAuthorization: Config.Authorization is sent as the Authorization
// header of every request (credentials kept out of the URL).
func TestSinkAuthorization(t *testing.T) {
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer srv.Close()
	s := httpsink.New(httpsink.Config{Authorization: "Bearer from-secrets-manager"}, httpsink.NewRoundRobin(srv.URL), nil, &noSleep{})
	res, _ := s.Store(context.Background(), []consume.Message{{ID: "a", Body: []byte(`{}`)}, {ID: "b", Body: []byte(`{}`)}})
	if res[0].Outcome != consume.Stored || len(got) != 2 || got[0] != "Bearer from-secrets-manager" || got[1] != got[0] {
		t.Errorf("Authorization headers %q (outcome %v); want the configured one on every request", got, res[0].Outcome)
	}
}

// TestSinkPoolsConnections: batches of Parallel requests reuse pooled
// connections. The default transport keeps 2 idle per host, so about
// Parallel-2 new handshakes per batch: 44 to 54 over ten batches. Pooled, the
// destination sees about Parallel over the ten; the bound is twice that,
// because the transport may dial a spare when a request asks for a
// connection while another is on its way back to the pool (9 seen on a
// busy machine), which is timing, not a lost pool.
func TestSinkPoolsConnections(t *testing.T) {
	var mu sync.Mutex
	conns := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			mu.Lock()
			conns++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	const parallel = 8
	s := httpsink.New(httpsink.Config{Parallel: parallel}, httpsink.NewRoundRobin(srv.URL), nil, &noSleep{})
	batch := make([]consume.Message, parallel)
	for i := range batch {
		batch[i] = consume.Message{ID: string(rune('a' + i)), Body: []byte(`{}`)}
	}
	for range 10 {
		if res, _ := s.Store(context.Background(), batch); res[0].Outcome != consume.Stored {
			t.Fatalf("Store: %+v", res[0])
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns > 2*parallel {
		t.Errorf("%d new connections over 10 batches of %d parallel requests; want at most %d (pooled; unpooled: 44 to 54)", conns, parallel, 2*parallel)
	}
}

func TestRedact(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://api.example.com/orders", "https://api.example.com/orders"},
		{"https://u:p@api.example.com/orders", "https://REDACTED@api.example.com/orders"},
		{"https://api.example.com/orders?token=abc&x=1#frag", "https://api.example.com/orders?token=REDACTED&x=REDACTED"},
		{"http://[::1:bad", "(unparsable endpoint, redacted)"},
	} {
		if got := httpsink.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}
