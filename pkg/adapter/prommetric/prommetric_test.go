package prommetric_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/adapter/prommetric"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
	"github.com/sluice-dev/sluice/pkg/metric/metrictest"
)

// gauge is a scrape target whose values the test sets.
type gauge struct {
	mu     sync.Mutex
	values map[string]float64 // instance label -> value
}

func (g *gauge) set(instance string, v float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.values[instance] = v
}

func (g *gauge) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# HELP sluice_test_cpu CPU utilization of a test destination, percent.")
	fmt.Fprintln(w, "# TYPE sluice_test_cpu gauge")
	for inst, v := range g.values {
		fmt.Fprintf(w, "sluice_test_cpu{node=%q} %g\n", inst, v)
	}
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startPrometheus starts a real Prometheus server that scrapes target every
// second, and returns its base URL.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin := testenv.Binary(t, "SLUICE_PROMETHEUS_BIN", "prometheus")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: sluice-test
    static_configs:
      - targets: [%q]
`, target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cmd := exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
	)
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	return "http://" + addr
}

// waitFor reads q until cond holds or the test's patience runs out.
func waitFor(t *testing.T, r *prommetric.Reader, q metric.Query, cond func(metric.Sample) bool) metric.Sample {
	t.Helper()
	var last metric.Sample
	var lastErr error
	for range 300 {
		got, err := r.ReadMetrics(context.Background(), []metric.Query{q}, time.Now())
		if err == nil && cond(got[0]) {
			return got[0]
		}
		if err == nil {
			last = got[0]
		}
		lastErr = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("query %q: condition never held; last sample %+v, last error %v", q.PromQL, last, lastErr)
	return metric.Sample{}
}

func TestReadMetricsRealPrometheus(t *testing.T) {
	g := &gauge{values: map[string]float64{"db-1": 42}}
	target := httptest.NewServer(g)
	defer target.Close()
	u, _ := url.Parse(target.URL)
	base := startPrometheus(t, u.Host)
	r, err := prommetric.New(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	cpu := metric.Query{Source: prommetric.Name, PromQL: `sluice_test_cpu{node="db-1"}`}
	waitFor(t, r, cpu, func(s metric.Sample) bool { return s.Found && s.Value == 42 })

	changed := time.Now()
	g.set("db-1", 77.5)
	s := waitFor(t, r, cpu, func(s metric.Sample) bool { return s.Found && s.Value == 77.5 })
	// The sample that shows the new value was scraped after the change.
	if s.Time.Before(changed.Truncate(time.Millisecond)) {
		t.Errorf("sample time %v is before the gauge changed at %v", s.Time, changed)
	}
	metrictest.Run(t, r, metrictest.Fixture{
		Present: cpu, Value: 77.5,
		Missing: metric.Query{Source: prommetric.Name, PromQL: `sluice_test_cpu{node="nowhere"}`},
		Foreign: metric.Query{Source: cwmetric.Name, Metric: "CPUUtilization"},
	})

	// The controller's tick on this metric: a loop whose PARAMS name the
	// PromQL query reads 77.5 through the real server and writes its rate.
	store := memstore.New()
	if err := store.WriteParams(context.Background(), "prom", map[string]any{
		"setpoint": 60.0, "kp": 1.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 500.0,
		"metric_source": "prometheus", "metric_promql": cpu.PromQL, "stale_after": "1m",
	}); err != nil {
		t.Fatal(err)
	}
	tk := &loop.Ticker{Sources: looptest.Sources(), Store: store, Metrics: map[string]metric.Reader{prommetric.Name: r}, Now: time.Now}
	reports, err := tk.Tick(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if rep := reports[0]; rep.Outcome != loop.OutcomeApplied || rep.Stale || rep.Measured != 77.5 || !rep.RateWritten {
		t.Errorf("tick on the Prometheus metric = %+v; want applied, fresh, measured 77.5, rate written", rep)
	}
	if rate, err := store.ReadRate(context.Background(), "prom"); err != nil || rate.PerSecond < 10 || rate.PerSecond > 500 {
		t.Errorf("RATE = %+v, %v; want a rate within [10, 500]", rate, err)
	}

	g.set("db-2", 10)
	waitFor(t, r, metric.Query{Source: prommetric.Name, PromQL: `sluice_test_cpu{node="db-2"}`},
		func(s metric.Sample) bool { return s.Found })

	queries := []metric.Query{
		cpu,
		{Source: prommetric.Name, PromQL: `max(sluice_test_cpu)`},
		{Source: prommetric.Name, PromQL: `sluice_test_cpu`},
		{Source: prommetric.Name, PromQL: `sluice_test_cpu{node="nowhere"}`},
		{Source: prommetric.Name, PromQL: `sum(`},
		{Source: prommetric.Name, PromQL: `scalar(max(sluice_test_cpu))`},
		{Source: cwmetric.Name, Metric: "CPUUtilization"},
	}
	got, err := r.ReadMetrics(context.Background(), queries, time.Now())
	if err != nil {
		t.Fatalf("ReadMetrics: %v", err)
	}
	tests := []struct {
		name    string
		found   bool
		value   float64
		wantErr bool
	}{
		{"selector", true, 77.5, false},
		{"aggregate", true, 77.5, false},
		{"two series", false, 0, true},
		{"no series", false, 0, false},
		{"syntax error", false, 0, true},
		{"scalar", true, 77.5, false},
		{"cloudwatch query", false, 0, true},
	}
	for i, tt := range tests {
		s := got[i]
		if s.Found != tt.found || s.Value != tt.value || (s.Err != nil) != tt.wantErr {
			t.Errorf("%s (%q): sample = %+v; want found=%v value=%v error=%v", tt.name, queries[i].PromQL, s, tt.found, tt.value, tt.wantErr)
		}
		if s.Found && s.Time.IsZero() {
			t.Errorf("%s: found sample without a time", tt.name)
		}
	}
}

func TestReadMetricsUnreachable(t *testing.T) {
	addr := freePort(t) // nothing listens there any more
	r, err := prommetric.New("http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.ReadMetrics(context.Background(), []metric.Query{{Source: prommetric.Name, PromQL: "up"}}, time.Now())
	if err != nil || len(got) != 1 || got[0].Err == nil {
		t.Fatalf("ReadMetrics against a closed port = %+v, %v; want the query's own error", got, err)
	}
}

// TestReadMetricsIsolatesEachQuery: one query answered with HTTP 500 and
// one that fails late fail alone; the others are found, and read while the
// slow one is in flight: the slow query's handler answers only once every
// other query has been answered, which a reader reading one query at a time
// would never see (it would wait for the slow query's timeout first). The
// test asserts that order, not a time: the timeout is a safety net only.
func TestReadMetricsIsolatesEachQuery(t *testing.T) {
	fast := []string{"a_cpu", "broken_cpu", "b_cpu", "c_cpu"}
	var answered sync.WaitGroup
	answered.Add(len(fast))
	othersFirst := make(chan bool, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.FormValue("query")
		switch {
		case strings.Contains(q, "slow"):
			done := make(chan struct{})
			go func() { answered.Wait(); close(done) }()
			select {
			case <-done:
				othersFirst <- true
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"status":"error","errorType":"unavailable","error":"late"}`)
			case <-req.Context().Done():
				othersFirst <- false
			}
			return
		case strings.HasPrefix(q, "timestamp("):
		default:
			defer answered.Done()
		}
		if strings.Contains(q, "broken") {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, `{"status":"error","errorType":"internal","error":"boom"}`)
			return
		}
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[%d,"55"]}]}}`, time.Now().Unix())
	}))
	defer srv.Close()
	r, err := prommetric.New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.QueryTimeout = time.Minute
	qs := []metric.Query{{Source: prommetric.Name, PromQL: "slow_cpu"}}
	for _, q := range fast {
		qs = append(qs, metric.Query{Source: prommetric.Name, PromQL: q})
	}
	got, err := r.ReadMetrics(context.Background(), qs, time.Now())
	if err != nil {
		t.Fatalf("ReadMetrics = %v; want nil (errors are per query)", err)
	}
	for i, s := range got {
		bad := qs[i].PromQL == "slow_cpu" || qs[i].PromQL == "broken_cpu"
		if bad != (s.Err != nil) || (!bad && (!s.Found || s.Value != 55)) {
			t.Errorf("%s: sample %+v; want error %v", qs[i].PromQL, s, bad)
		}
	}
	if !strings.Contains(fmt.Sprint(got[2].Err), "500") {
		t.Errorf("broken_cpu error = %v; want it to say HTTP 500", got[2].Err)
	}
	if !<-othersFirst {
		t.Error("the other queries were not answered while slow_cpu was in flight; want them concurrent")
	}
}

// TestReadMetricsQueryTimeout: a query whose server never answers fails
// with its own timeout (however late a busy machine notices it).
func TestReadMetricsQueryTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-req.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	r, err := prommetric.New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	r.QueryTimeout = 50 * time.Millisecond
	got, err := r.ReadMetrics(context.Background(), []metric.Query{{Source: prommetric.Name, PromQL: "hung_cpu"}}, time.Now())
	if err != nil || len(got) != 1 {
		t.Fatalf("ReadMetrics = %+v, %v; want one sample and no error", got, err)
	}
	if got[0].Err == nil || !strings.Contains(got[0].Err.Error(), "deadline") {
		t.Errorf("hung_cpu error = %v; want its deadline exceeded", got[0].Err)
	}
}

func TestNewRejectsBadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:9090", "://x"} {
		if _, err := prommetric.New(u, nil); err == nil {
			t.Errorf("New(%q) = nil error; want an error", u)
		}
	}
}
