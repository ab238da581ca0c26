package balance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/balancelab"
	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/balance"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/wrr"
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

// The smooth weighted round-robin picker is the HTTP sink's endpoint picker.
var _ httpsink.Picker = (*wrr.Picker)(nil)

// sender is a consumer's batch loop reduced to what this test needs: every
// 10 ms it hands the HTTP sink the messages owed at a steady rate, and the
// sink POSTs each to the endpoint the picker chooses.
type sender struct {
	sink   *httpsink.Sink
	rate   float64 // messages per second
	failed atomic.Int64
}

func (s *sender) run(ctx context.Context) {
	const batchEvery = 10 * time.Millisecond
	perBatch := s.rate * batchEvery.Seconds()
	t := time.NewTicker(batchEvery)
	defer t.Stop()
	var owed float64
	var id int
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		owed += perBatch
		var batch []consume.Message
		for ; owed >= 1; owed-- {
			id++
			batch = append(batch, consume.Message{ID: fmt.Sprintf("m-%d", id), Body: []byte(`{"n":1}`)})
		}
		res, err := s.sink.Store(ctx, batch)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.failed.Add(int64(len(batch)))
			continue
		}
		for _, r := range res {
			if r.Outcome != consume.Stored {
				s.failed.Add(1)
			}
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
	// Nodes are named by the URL the sink POSTs to.
	nodes := map[string]*node{}
	capacities := map[string]float64{}
	urls := map[string]string{} // node -> base URL for /metrics
	weights := map[string]float64{}
	for i, c := range []float64{1000.0 / 6, 2000.0 / 6, 3000.0 / 6} {
		n := &node{capacity: c, window: window, now: time.Now}
		srv := httptest.NewServer(n)
		t.Cleanup(srv.Close)
		name := srv.URL + "/work"
		nodes[name], capacities[name], urls[name], weights[name] = n, c, srv.URL, 1
		t.Logf("node %d: %s, capacity %.0f units/s", i+1, name, c)
	}
	picker, err := wrr.NewPicker(weights)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	sink := httpsink.New(httpsink.Config{Timeout: 2 * time.Second}, picker, client, consume.WallClock{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &sender{sink: sink, rate: rate}
	done := make(chan struct{})
	go func() { defer close(done); s.run(ctx) }()
	defer func() { cancel(); <-done }()

	metrics := metricReader{client: client, urls: urls}
	wait, stop := ticks(ctx, tick)
	defer stop()

	// Phase 1: plain round-robin (equal weights), once the window is full.
	for i := 0; i < 5; i++ {
		wait()
	}
	var rr []float64
	for i := 0; i < 5; i++ {
		wait()
		rr = append(rr, balancelab.MaxAvg(metrics.Utilization(ctx)))
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
		series = append(series, balancelab.MaxAvg(u))
	}
	pid := median(series[len(series)-5:])
	t.Logf("PI balancer max/avg by tick %.3f; weights %v", series, c.Weights())

	// Phase 3: the middle node's metric goes missing: its weight is held.
	var middle string
	for name, capacity := range capacities {
		if capacity == 2000.0/6 {
			middle = name
		}
	}
	held := c.Weights()[middle]
	nodes[middle].failing.Store(true)
	for i := 0; i < 3; i++ {
		wait()
		u := metrics.Utilization(ctx)
		if !math.IsNaN(u[middle]) {
			t.Fatalf("middle node's utilization with a failing metric = %v; want NaN", u[middle])
		}
		c.Update(u, tick)
		if err := picker.SetWeights(c.Weights()); err != nil {
			t.Fatal(err)
		}
		if got := c.Weights()[middle]; got != held {
			t.Errorf("weight of the middle node with its metric missing = %v; want held at %v", got, held)
		}
	}
	nodes[middle].failing.Store(false)

	if n := s.failed.Load(); n > 0 {
		t.Errorf("%d messages not stored; want 0", n)
	}
	checkBalanced(t, "PI balancer", roundRobin, pid, series)
	// The weights found the capacities, which the balancer was never told.
	w := c.Weights()
	for name, capacity := range capacities {
		want := capacity / 1000
		if math.Abs(w[name]-want) > 0.2*want {
			t.Errorf("weight of %s (capacity %.0f) = %.3f; want about %.3f (its share of the capacity)", name, capacity, w[name], want)
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

// checkBalanced checks the max/avg load of the 1:2:3 fleet: above 1.3 under
// round-robin, within 1.05 over the last 5 ticks under who (series is every
// tick's), and below round-robin's.
func checkBalanced(t *testing.T, who string, roundRobin, pid float64, series []float64) {
	t.Helper()
	if roundRobin < 1.3 {
		t.Errorf("round-robin max/avg = %.3f; want >= 1.3 (the fleet is 1:2:3)", roundRobin)
	}
	if pid > 1.05 {
		t.Errorf("%s max/avg over the last 5 ticks = %.3f; want <= 1.05 (series %.3f)", who, pid, series)
	}
	if pid >= roundRobin {
		t.Errorf("%s max/avg %.3f; want below round-robin's %.3f", who, pid, roundRobin)
	}
}

// ticks returns wait, which waits for the next tick of period or the end
// of ctx, and stop, which stops the ticks.
func ticks(ctx context.Context, period time.Duration) (wait, stop func()) {
	t := time.NewTicker(period)
	wait = func() {
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return wait, t.Stop
}
