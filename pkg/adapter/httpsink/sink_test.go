package httpsink_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// noSleep is a clock whose Sleep returns at once and records the waits.
type noSleep struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (c *noSleep) Now() time.Time { return time.Unix(0, 0) }
func (c *noSleep) Sleep(ctx context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	return ctx.Err()
}

// server fails on demand: the body names a script of responses, one per
// attempt ("503,503,200"); "slow" sleeps past the client timeout.
type server struct {
	mu       sync.Mutex
	attempts map[string]int
	stored   map[string]string
}

func newServer(t *testing.T) (*server, *httptest.Server) {
	s := &server{attempts: map[string]int{}, stored: map[string]string{}}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" || key == "" {
			http.Error(w, "want JSON with an Idempotency-Key", http.StatusBadRequest)
			return
		}
		var script []string
		if i := strings.Index(string(body), `"script":"`); i >= 0 {
			rest := string(body)[i+len(`"script":"`):]
			script = strings.Split(rest[:strings.Index(rest, `"`)], ",")
		}
		s.mu.Lock()
		n := s.attempts[key]
		s.attempts[key]++
		s.mu.Unlock()
		step := "200"
		if n < len(script) {
			step = script[n]
		}
		switch step {
		case "slow":
			time.Sleep(300 * time.Millisecond)
		case "200":
			s.mu.Lock()
			s.stored[key] = string(body)
			s.mu.Unlock()
		case "429":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		case "400":
			http.Error(w, "field qty missing", http.StatusBadRequest)
		default:
			http.Error(w, "boom", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(ts.Close)
	return s, ts
}

func TestStore(t *testing.T) {
	tests := []struct {
		name     string
		script   string
		want     consume.Outcome
		attempts int
		reason   string
	}{
		{"ok", "200", consume.Stored, 1, ""},
		{"5xx then ok", "503,500,200", consume.Stored, 3, ""},
		{"429 then ok", "429,200", consume.Stored, 2, ""},
		{"timeout then ok", "slow,200", consume.Stored, 2, ""},
		{"4xx is permanent", "400", consume.Permanent, 1, "HTTP 400 Bad Request: field qty missing"},
		{"always 5xx is retryable", "503,503,503,503,503", consume.Retryable, 4, "HTTP 503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, ts := newServer(t)
			clk := &noSleep{}
			s := httpsink.New(httpsink.Config{Timeout: 100 * time.Millisecond}, httpsink.NewRoundRobin(ts.URL), nil, clk)
			m := consume.Message{ID: "msg-1", Body: []byte(`{"script":"` + tt.script + `"}`)}
			res, err := s.Store(context.Background(), []consume.Message{m})
			if err != nil {
				t.Fatalf("Store: %v", err)
			}
			if res[0].Outcome != tt.want || !strings.Contains(res[0].Reason, tt.reason) {
				t.Errorf("Store(%s) = %v %q; want %v containing %q", tt.script, res[0].Outcome, res[0].Reason, tt.want, tt.reason)
			}
			if got := srv.attempts["msg-1"]; got != tt.attempts {
				t.Errorf("attempts = %d; want %d", got, tt.attempts)
			}
			if _, ok := srv.stored["msg-1"]; ok != (tt.want == consume.Stored) {
				t.Errorf("server stored = %v; want %v", ok, tt.want == consume.Stored)
			}
			if len(clk.waits) != tt.attempts-1 {
				t.Errorf("backoff waits = %v; want %d", clk.waits, tt.attempts-1)
			}
			for i, w := range clk.waits {
				if w < 0 || w > 2*time.Second {
					t.Errorf("wait %d = %v; want within [0, 2s]", i, w)
				}
			}
		})
	}
}

func TestRoundRobinSpreadsRequests(t *testing.T) {
	a, tsA := newServer(t)
	b, tsB := newServer(t)
	s := httpsink.New(httpsink.Config{}, httpsink.NewRoundRobin(tsA.URL, tsB.URL), nil, &noSleep{})
	var ms []consume.Message
	for _, id := range []string{"1", "2", "3", "4", "5", "6"} {
		ms = append(ms, consume.Message{ID: id, Body: []byte(`{}`)})
	}
	if _, err := s.Store(context.Background(), ms); err != nil {
		t.Fatal(err)
	}
	if len(a.stored) != 3 || len(b.stored) != 3 {
		t.Errorf("stored %d on A and %d on B; want 3 and 3", len(a.stored), len(b.stored))
	}
}
