package balance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/balancelab"
	"github.com/sluice-dev/sluice/internal/testclock"
	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/wrr"
)

// nodeMetrics is the loop's metric reader over the nodes: a query's PromQL
// is the node's base URL, and the newest datapoint is its /metrics now. A
// node whose metric cannot be read gets a Sample with Err (missing, never 0).
type nodeMetrics struct {
	client *http.Client
	mu     sync.Mutex
	calls  int
}

var _ metric.Reader = (*nodeMetrics)(nil)

func (m *nodeMetrics) ReadMetrics(ctx context.Context, qs []metric.Query, now time.Time) ([]metric.Sample, error) {
	m.mu.Lock()
	m.calls++
	m.mu.Unlock()
	out := make([]metric.Sample, len(qs))
	for i, q := range qs {
		out[i] = m.read(ctx, q.PromQL, now)
	}
	return out, nil
}

func (m *nodeMetrics) read(ctx context.Context, base string, now time.Time) metric.Sample {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return metric.Sample{Err: err}
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return metric.Sample{Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return metric.Sample{Err: fmt.Errorf("GET %s/metrics: %s", base, resp.Status)}
	}
	var v struct {
		Utilization float64 `json:"utilization"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		return metric.Sample{Err: fmt.Errorf("GET %s/metrics: %w", base, err)}
	}
	return metric.Sample{Value: v.Utilization, Time: now, Found: true}
}

// TestProductBalancesThreeHTTPServers runs the balancer as the product does:
// the loop's PARAMS item lists three HTTP servers of capacity 1:2:3, the
// controller (loop.Ticker over a memstore) reads their utilization through a
// metric reader and writes RATE with weights keyed by endpoint, and a
// consume.Consumer drains a queue through the HTTP sink, whose smooth
// weighted round-robin picker follows RATE's weights at every rate refresh.
func TestProductBalancesThreeHTTPServers(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: about 17 s of real traffic")
	}
	const (
		tick     = 200 * time.Millisecond // real time between controller ticks
		period   = time.Second            // the loop's tick_period (virtual)
		window   = 600 * time.Millisecond // the servers' utilization window
		rate     = 500.0                  // messages/s (manual mode)
		messages = 30_000                 // more than the test drains
		loopID   = "fleet"
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Three servers of capacity 1:2:3; a balanced fleet runs at 50 %.
	nodes := map[string]*node{} // endpoint -> server
	capacities := map[string]float64{}
	nodesAttr := map[string]any{}
	var endpoints []string
	var served sync.Map // message id -> true, every POST any server took
	for i, c := range []float64{1000.0 / 6, 2000.0 / 6, 3000.0 / 6} {
		n := &node{capacity: c, window: window, now: time.Now}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				served.Store(r.Header.Get("Idempotency-Key"), true)
			}
			n.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		ep := srv.URL + "/work"
		nodes[ep], capacities[ep] = n, c
		endpoints = append(endpoints, ep)
		nodesAttr[fmt.Sprintf("node-%d", i+1)] = map[string]any{"endpoint": ep, "metric": srv.URL}
		t.Logf("node-%d: %s, capacity %.0f units/s", i+1, ep, c)
	}
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 16}}

	// The controller: PARAMS first without nodes (round-robin), manual
	// rate; the loop's own metric is the largest server's.
	store := memstore.New()
	params := map[string]any{
		"setpoint": 70.0, "kp": 2.0, "ki": 2.0, "min_rate": 10.0, "max_rate": 1000.0,
		"mode": "manual", "manual_rate": rate, "tick_period": period.String(),
		"metric_source": "prometheus", "metric_promql": endpoints[2][:len(endpoints[2])-len("/work")],
		// Gains for a metric averaged over three ticks (see
		// TestBalancerEvensOutThreeHTTPServers).
		"balance_kp": 0.1, "balance_ki": 0.3,
	}
	if err := store.WriteParams(ctx, loopID, params); err != nil {
		t.Fatal(err)
	}
	// The controller's clock: one tick period per real tick, so that 1 s
	// ticks (the shortest PARAMS allows) run every 200 ms.
	clock := testclock.New(time.Now())
	metrics := &nodeMetrics{client: client}
	ticker := &loop.Ticker{Sources: looptest.Sources(), Store: store, Metrics: map[string]metric.Reader{prommetric.Name: metrics}, Now: clock.Now}
	tickOnce := func() loop.Report {
		t.Helper()
		clock.Advance(period)
		reports, err := ticker.Tick(ctx)
		if err != nil {
			t.Fatalf("Tick: %v", err)
		}
		if len(reports) != 1 || reports[0].Outcome != loop.OutcomeApplied {
			t.Fatalf("Tick reports = %+v; want the loop applied", reports)
		}
		return reports[0]
	}
	tickOnce() // RATE exists before the consumer starts

	// The consumer: HTTP sink over the three endpoints with the smooth WRR
	// picker; RATE's weights reach the picker at every rate refresh.
	picker, err := wrr.NewPicker(wrr.Spread(endpoints, nil))
	if err != nil {
		t.Fatal(err)
	}
	var weightErrs sync.Map
	rates := consume.NewRateCache(consume.RateCacheConfig{
		Loop: loopID, Period: 100 * time.Millisecond, SafeRate: 50,
		Weights: func(w map[string]float64) {
			if err := picker.SetWeights(wrr.Spread(endpoints, w)); err != nil {
				weightErrs.Store(err.Error(), true)
			}
		},
	}, store, nil, consume.WallClock{}, nil, nil)
	sink := httpsink.New(httpsink.Config{Timeout: 2 * time.Second, Parallel: 10}, picker, client, consume.WallClock{})
	consumer := consume.New(consume.Config{BatchSize: 10}, rates, sink, consume.WallClock{}, nil, nil)
	queue := memqueue.New()
	for i := range messages {
		queue.Send(fmt.Appendf(nil, `{"n":%d}`, i))
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = consumer.Run(ctx, queue) }()
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
		}
	}
	defer stop()

	maxAvg := func() float64 {
		// The servers' own view: the loop reads one node in phase 1.
		u := map[string]float64{}
		for ep := range nodes {
			u[ep] = nodes[ep].utilization()
		}
		return balancelab.MaxAvg(u)
	}
	wait, stopTicks := ticks(ctx, tick)
	defer stopTicks()

	// Phase 1: no nodes in PARAMS: RATE has no weights, the picker spreads
	// equally (round-robin).
	var rr []float64
	for i := range 10 {
		wait()
		rep := tickOnce()
		if rep.Weights != nil {
			t.Fatalf("phase 1: weights %v without nodes in PARAMS", rep.Weights)
		}
		if i >= 5 { // once the window is full of traffic
			rr = append(rr, maxAvg())
		}
	}
	roundRobin := median(rr)
	t.Logf("round-robin (no nodes in PARAMS) max/avg %.3f (ticks %.3f)", roundRobin, rr)

	// Phase 2: the operator lists the nodes in PARAMS.
	params["nodes"] = nodesAttr
	if err := store.WriteParams(ctx, loopID, params); err != nil {
		t.Fatal(err)
	}
	var series []float64
	var last loop.Report
	for range 40 {
		wait()
		last = tickOnce()
		if last.ParamsStatus == loop.StatusRefused {
			t.Fatalf("PARAMS with nodes refused: %s", last.ParamsReason)
		}
		if len(last.Nodes) == 3 {
			series = append(series, balancelab.MaxAvg(last.Nodes))
		}
	}
	if len(series) < 30 {
		t.Fatalf("only %d of 40 ticks read all three nodes' metrics", len(series))
	}
	pid := median(series[len(series)-5:])
	t.Logf("product loop max/avg by tick %.3f", series)
	t.Logf("RATE weights %v", last.Weights)
	t.Logf("picker weights %v", picker.Weights())

	// The middle node's metric goes missing for three ticks: its weight
	// in RATE is held to the bit, and the consumers keep using it.
	middle := endpoints[1]
	held := last.Weights[middle]
	nodes[middle].failing.Store(true)
	for range 3 {
		wait()
		rep := tickOnce()
		if got := rep.Weights[middle]; got != held {
			t.Errorf("RATE weight of the middle node with its metric missing = %v; want held at %v", got, held)
		}
		if len(rep.NodesMissing) != 1 {
			t.Errorf("nodes missing = %v; want the middle node", rep.NodesMissing)
		}
	}
	nodes[middle].failing.Store(false)

	// Phase 3: the rate loop takes over (auto, bumpless from the manual
	// rate) with a setpoint below the fleet's utilization at 500
	// messages/s: it holds the hottest node there (regulate: max).
	const setpoint = 40.0
	params["mode"], params["setpoint"] = "auto", setpoint
	if err := store.WriteParams(ctx, loopID, params); err != nil {
		t.Fatal(err)
	}
	var hottest, allowed []float64
	for range 30 {
		wait()
		rep := tickOnce()
		if len(rep.Nodes) == 3 {
			hottest = append(hottest, rep.Measured)
		}
		allowed = append(allowed, rep.Rate)
	}
	t.Logf("auto at setpoint %.0f: hottest node by tick %.1f", setpoint, hottest)
	t.Logf("auto: rate by tick %.0f", allowed)
	if len(hottest) < 20 {
		t.Fatalf("only %d of 30 auto ticks read all three nodes", len(hottest))
	}
	if h := median(hottest[len(hottest)-5:]); math.Abs(h-setpoint) > 5 {
		t.Errorf("hottest node over the last 5 auto ticks = %.1f (median); want %.0f +- 5", h, setpoint)
	}
	if r := median(allowed[len(allowed)-5:]); r >= 0.95*rate {
		t.Errorf("rate over the last 5 auto ticks = %.0f; want below the manual %.0f (the setpoint is below the fleet's utilization there)", r, rate)
	}
	time.Sleep(150 * time.Millisecond) // one rate refresh
	pw := picker.Weights()
	final, err := store.ReadRate(ctx, loopID)
	if err != nil {
		t.Fatal(err)
	}
	// Failures before shutdown (a batch cut short by it is released, not
	// failed by the service).
	failed := consumer.Stats().Failed.Load()
	stop()

	// Nothing lost: every message is acknowledged (and was served), still
	// queued, or back in the queue; none dead; no sink failure.
	ready, inflight, acked, dead := queue.Counts()
	stats := consumer.Stats()
	t.Logf("queue: %d acked, %d ready, %d in flight, %d dead; stored %d, failed %d; served %d",
		acked, ready, inflight, dead, stats.Stored.Load(), stats.Failed.Load(), countMap(&served))
	if ready+inflight+acked != messages || dead != 0 {
		t.Errorf("queue: %d ready + %d in flight + %d acked, %d dead; want %d messages accounted for, 0 dead", ready, inflight, acked, dead, messages)
	}
	if failed != 0 {
		t.Errorf("%d messages failed in the sink before shutdown; want 0", failed)
	}
	if acked == 0 || countMap(&served) < acked {
		t.Errorf("%d messages served for %d acknowledged; want every acknowledged message served", countMap(&served), acked)
	}
	weightErrs.Range(func(k, _ any) bool { t.Errorf("SetWeights: %v", k); return true })

	checkBalanced(t, "product loop", roundRobin, pid, series)
	// RATE's weights found the capacities, and the picker follows them.
	for ep, c := range capacities {
		want := c / 1000
		if w := last.Weights[ep]; math.Abs(w-want) > 0.2*want {
			t.Errorf("RATE weight of %s (capacity %.0f) = %.3f; want about %.3f", ep, c, w, want)
		}
		if math.Abs(pw[ep]-final.Weights[ep]) > 1e-5 {
			t.Errorf("picker weight of %s = %.6f; want RATE's %.6f", ep, pw[ep], final.Weights[ep])
		}
	}
	if metrics.calls < 50 {
		t.Errorf("ReadMetrics calls = %d; want one per tick", metrics.calls)
	}
}

func countMap(m *sync.Map) int {
	n := 0
	m.Range(func(_, _ any) bool { n++; return true })
	return n
}
