package balance_test

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/balance"
)

// node is a local HTTP server of a given capacity. Every POST /work costs
// one unit of work; GET /metrics reports the utilization that the work done
// over the last window causes, 100 * units / (capacity * window), capped at
// 100 %, as a CPU metric averaged over a period would.
type node struct {
	capacity float64 // units of work per second at 100 %
	window   time.Duration
	now      func() time.Time
	failing  atomic.Bool // GET /metrics answers 503 while set

	mu    sync.Mutex
	times []time.Time // arrival of each request within the window
	total int
}

func (n *node) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/work":
		_, _ = io.Copy(io.Discard, r.Body)
		n.mu.Lock()
		n.times = append(n.times, n.now())
		n.total++
		n.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && r.URL.Path == "/metrics":
		if n.failing.Load() {
			http.Error(w, "metric unavailable", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]float64{"utilization": n.utilization()})
	default:
		http.NotFound(w, r)
	}
}

func (n *node) utilization() float64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	cut := n.now().Add(-n.window)
	i := sort.Search(len(n.times), func(i int) bool { return n.times[i].After(cut) })
	n.times = append(n.times[:0], n.times[i:]...)
	return math.Min(100, 100*float64(len(n.times))/(n.capacity*n.window.Seconds()))
}

// metricReader reads every node's utilization over HTTP; a node whose
// metric cannot be read is reported as NaN (missing), never as 0.
type metricReader struct {
	client *http.Client
	urls   map[string]string
}

func (m metricReader) Utilization(ctx context.Context) map[string]float64 {
	u := make(map[string]float64, len(m.urls))
	for name, url := range m.urls {
		u[name] = math.NaN()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
		if err != nil {
			continue
		}
		resp, err := m.client.Do(req)
		if err != nil {
			continue
		}
		var v struct {
			Utilization float64 `json:"utilization"`
		}
		if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&v) == nil {
			u[name] = v.Utilization
		}
		resp.Body.Close()
	}
	return u
}

// sender is the HTTP sink's request loop: it POSTs at a steady rate, each
// request to the node the picker chooses. (pkg/adapter/httpsink had not
// landed when this test was written; its endpoint picker is what Picker
// serves.)
type sender struct {
	client *http.Client
	urls   map[string]string
	picker *balance.Picker
	rate   float64 // requests per second
	errors atomic.Int64
}

func (s *sender) run(ctx context.Context) {
	const batchEvery = 10 * time.Millisecond
	perBatch := s.rate * batchEvery.Seconds()
	t := time.NewTicker(batchEvery)
	defer t.Stop()
	var owed float64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		owed += perBatch
		for ; owed >= 1; owed-- {
			url := s.urls[s.picker.Pick()]
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/work", strings.NewReader(`{"id":1}`))
			if err != nil {
				s.errors.Add(1)
				continue
			}
			resp, err := s.client.Do(req)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				s.errors.Add(1)
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

func TestBalancerEvensOutThreeHTTPServers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: about 12 s of real traffic")
	}
	const (
		tick   = 200 * time.Millisecond
		window = 600 * time.Millisecond
		rate   = 500.0 // requests/s; 1 unit of work each
	)
	// Capacities 1:2:3, sized so that a balanced fleet runs at 50 %:
	// 500 units/s over 1000 units/s of capacity. Round-robin gives the
	// smallest node 167 units/s, more than its 167 capacity: saturated.
	capacities := map[string]float64{"node-1": 1000.0 / 6, "node-2": 2000.0 / 6, "node-3": 3000.0 / 6}
	nodes := map[string]*node{}
	urls := map[string]string{}
	weights := map[string]float64{}
	for name, c := range capacities {
		n := &node{capacity: c, window: window, now: time.Now}
		srv := httptest.NewServer(n)
		t.Cleanup(srv.Close)
		nodes[name], urls[name], weights[name] = n, srv.URL, 1
	}
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: 4},
	}
	picker, err := balance.NewPicker(weights)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &sender{client: client, urls: urls, picker: picker, rate: rate}
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	defer func() { cancel(); <-done }()

	metrics := metricReader{client: client, urls: urls}
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	wait := func() {
		select {
		case <-ticker.C:
		case <-ctx.Done():
		}
	}

	// Phase 1: plain round-robin (equal weights), once the window is full.
	for i := 0; i < 5; i++ {
		wait()
	}
	var rr []float64
	for i := 0; i < 5; i++ {
		wait()
		rr = append(rr, balance.MaxAvg(metrics.Utilization(ctx)))
	}
	roundRobin := median(rr)
	t.Logf("round-robin max/avg %.3f (ticks %.3f)", roundRobin, rr)

	// Phase 2: the balancer reads every node's utilization each tick and
	// updates the picker's weights.
	cfg := balance.DefaultConfig()
	cfg.ProportionalGain = 0.1
	cfg.IntegralGain = 0.3 / tick.Seconds() // the 600 ms window lags about 1.5 ticks
	c := balance.Controller{Config: cfg}
	var series []float64
	last := time.Now()
	for i := 0; i < 40; i++ {
		wait()
		u := metrics.Utilization(ctx)
		now := time.Now()
		c.Update(u, now.Sub(last))
		last = now
		if err := picker.SetWeights(c.Weights()); err != nil {
			t.Fatalf("tick %d: SetWeights(%v): %v", i, c.Weights(), err)
		}
		series = append(series, balance.MaxAvg(u))
	}
	pid := median(series[len(series)-5:])
	t.Logf("PI balancer max/avg by tick %.3f; weights %v", series, c.Weights())

	// Phase 3: node-2's metric goes missing: its weight is held.
	held := c.Weights()["node-2"]
	nodes["node-2"].failing.Store(true)
	for i := 0; i < 3; i++ {
		wait()
		u := metrics.Utilization(ctx)
		if !math.IsNaN(u["node-2"]) {
			t.Fatalf("node-2 utilization with a failing metric = %v; want NaN", u["node-2"])
		}
		c.Update(u, tick)
		if err := picker.SetWeights(c.Weights()); err != nil {
			t.Fatal(err)
		}
		if got := c.Weights()["node-2"]; got != held {
			t.Errorf("weight of node-2 with its metric missing = %v; want held at %v", got, held)
		}
	}
	nodes["node-2"].failing.Store(false)

	if n := s.errors.Load(); n > 0 {
		t.Errorf("%d requests failed; want 0", n)
	}
	if roundRobin < 1.3 {
		t.Errorf("round-robin max/avg = %.3f; want >= 1.3 (the fleet is 1:2:3)", roundRobin)
	}
	if pid > 1.05 {
		t.Errorf("PI balancer max/avg over the last 5 ticks = %.3f; want <= 1.05 (series %.3f)", pid, series)
	}
	if pid >= roundRobin {
		t.Errorf("PI balancer max/avg %.3f; want below round-robin's %.3f", pid, roundRobin)
	}
	// The weights found the capacities, which the balancer was never told.
	w := c.Weights()
	for name, capacity := range capacities {
		want := capacity / 1000
		if math.Abs(w[name]-want) > 0.2*want {
			t.Errorf("weight of %s = %.3f; want about %.3f (its share of the capacity)", name, w[name], want)
		}
	}
	served := map[string]int{}
	for name, n := range nodes {
		n.mu.Lock()
		served[name] = n.total
		n.mu.Unlock()
	}
	t.Logf("requests served by node: %v", served)
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}
