package chaos

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestSilentProxyCountsRetriesOnIdleConnections: a client that times out
// during the silence and tries again on a pooled connection opened before
// it (httpsink keeps 8 idle per host) begins a request the proxy counts,
// although it accepts no new connection; the in-flight request it held at
// the silence's start and connections left idle count nothing.
func TestSilentProxyCountsRetriesOnIdleConnections(t *testing.T) {
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/in-flight" {
			close(arrived)
		}
		time.Sleep(100 * time.Millisecond) // the warm-up's requests overlap: one connection each
	}))
	defer srv.Close()
	p, err := StartSilentProxy(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}, Timeout: 300 * time.Millisecond}
	get := func(path string) error {
		resp, err := client.Get("http://" + p.Addr() + path)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	var wg sync.WaitGroup
	for range 5 { // five idle connections in the pool
		wg.Go(func() {
			if err := get("/"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	inFlight := make(chan error, 1)
	go func() { inFlight <- get("/in-flight") }() // on one of the idle connections
	<-arrived
	p.SetSilent(true) // before the answer: held
	if err := <-inFlight; err == nil {
		t.Fatal("the in-flight request answered during the silence")
	}
	for range 3 { // each attempt times out, the next on another idle connection
		if err := get("/"); err == nil {
			t.Fatal("a request answered during the silence")
		}
	}
	if p.Held() != 0 {
		t.Fatalf("Held() = %d: the client opened new connections; the test wants it to reuse idle ones", p.Held())
	}
	if got := p.Requests(); got != 3 {
		t.Errorf("Requests() = %d after one request held in flight and 3 attempts on idle connections during the silence; want 3", got)
	}
	p.SetSilent(false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ctx.Err() == nil && get("/") != nil { // served again once the silence ends
		time.Sleep(50 * time.Millisecond)
	}
	if ctx.Err() != nil {
		t.Fatal("not served again after the silence")
	}
}
