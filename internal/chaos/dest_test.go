package chaos

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestDestinationBrownout: a phase with Share 0.9 and Alt answers 9 of
// every 10 requests with 503 or 429, half each, and serves the tenth.
func TestDestinationBrownout(t *testing.T) {
	d := NewDestination([]Phase{{Status: http.StatusServiceUnavailable, Alt: http.StatusTooManyRequests, Share: 0.9, Lasts: time.Hour}})
	for i := range 100 {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"seq":1}`))
		req.Header.Set("Idempotency-Key", "k"+string(rune('a'+i%26)))
		d.ServeHTTP(httptest.NewRecorder(), req)
	}
	got := d.Answers()
	if got[503] != 45 || got[429] != 45 || got[200] != 10 {
		t.Errorf("answers to 100 requests = %v; want 45 x 503, 45 x 429, 10 x 200", got)
	}
}
