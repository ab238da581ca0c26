package dbload

import (
	"context"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestLatencyVsCPU is a measurement, not a check: the consumers' store
// latency per message on this machine's MariaDB against its CPU, under
// external loads of different shapes (docs/consumers.md, "On MariaDB").
// Eight consumers store batches of 10 through mysqlsink at a fixed total
// rate (the workload of make e2e-cascade: 350,000 of 400,000 rows per
// message), and each load runs for a phase beside them. It is heavy: run
// it under the lock, with SLUICE_LATENCY_PROBE=1 (the rate in msg/s; 1:
// the default 7) and -v:
//
//	flock /work/wt/heavy.lock env SLUICE_LATENCY_PROBE=1 go test ./internal/dbload -run LatencyVsCPU -v -timeout 20m
func TestLatencyVsCPU(t *testing.T) {
	probe := os.Getenv("SLUICE_LATENCY_PROBE")
	if probe == "" {
		t.Skip("a measurement of several minutes: set SLUICE_LATENCY_PROBE=1 (or the consumers' rate)")
	}
	msgRate, _ := strconv.ParseFloat(probe, 64)
	if msgRate <= 1 {
		msgRate = 7
	}
	phase := 20 * time.Second
	if d, err := time.ParseDuration(os.Getenv("SLUICE_LATENCY_PHASE")); err == nil {
		phase = d
	}
	db := openTestDB(t)
	db.SetMaxOpenConns(64)
	ctx := context.Background()
	const dataRows, scanRows = 400_000, 350_000
	if err := Install(ctx, db, Workload{DataRows: dataRows, ScanRows: scanRows}); err != nil {
		t.Fatal(err)
	}
	s, err := cpupub.NewSampler(0, cpupub.Named("mariadbd"), 0)
	if err != nil {
		t.Fatal(err)
	}
	cons := &probeConsumers{sink: mysqlsink.New(db), lim: rate.NewLimiter(rate.Limit(msgRate), 10)}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	for range 8 {
		cons.wg.Add(1)
		go cons.run(cctx)
	}
	loads := []struct {
		name    string
		qps     float64
		workers int
	}{
		{"none", 0, 0},
		{"paced 12 q/s, 4 conns", 12, 4},
		{"paced 18 q/s, 4 conns", 18, 4},
		{"unpaced, 1 conn", math.Inf(1), 1},
		{"unpaced, 2 conns", math.Inf(1), 2},
		{"unpaced, 4 conns", math.Inf(1), 4},
		{"unpaced, 8 conns", math.Inf(1), 8},
		{"none", 0, 0},
	}
	t.Logf("consumers: 8 x batches of 10 at %.1f msg/s; phase %v; %g cores", msgRate, phase, s.Cores)
	t.Logf("%-24s %8s %8s %8s %9s %9s %9s %8s", "load", "cpu %", "host %", "q/s", "msg/s", "mean ms", "p50 ms", "p90 ms")
	for _, l := range loads {
		var gen *LoadGenerator
		if l.workers > 0 {
			gen = &LoadGenerator{DB: db, Rate: l.qps, ScanRows: scanRows, DataRows: dataRows, Workers: l.workers}
			if math.IsInf(l.qps, 1) {
				gen.Rate = 1e6
			}
			if err := gen.Start(ctx); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3 * time.Second) // let the phase's queue form
		cons.reset()
		s0, _ := s.Sample()
		h0 := hostBusy()
		var q0 int64
		if gen != nil {
			q0, _ = gen.Queries()
		}
		time.Sleep(phase)
		s1, _ := s.Sample()
		h1 := hostBusy()
		cpu, _ := s.Utilization(s0, s1)
		qps := 0.0
		if gen != nil {
			q1, _ := gen.Queries()
			qps = float64(q1-q0) / phase.Seconds()
			gen.Stop()
		}
		n, mean, p50, p90 := cons.stats()
		t.Logf("%-24s %8.1f %8.1f %8.1f %9.1f %9.1f %9.1f %8.1f", l.name, cpu, 100*(h1[0]-h0[0])/math.Max(h1[1]-h0[1], 1e-9),
			qps, float64(n)/phase.Seconds(), mean, p50, p90)
	}
	stop()
	cons.wg.Wait()
}

// probeConsumers store batches of 10 at a shared rate and record each
// batch's time per message.
type probeConsumers struct {
	sink *mysqlsink.Sink
	lim  *rate.Limiter
	wg   sync.WaitGroup
	next atomic.Int64
	mu   sync.Mutex
	per  []float64 // ms per message
	msgs int
}

func (c *probeConsumers) run(ctx context.Context) {
	defer c.wg.Done()
	for ctx.Err() == nil {
		if c.lim.WaitN(ctx, 10) != nil {
			return
		}
		msgs := make([]consume.Message, 10)
		for i := range msgs {
			n := c.next.Add(1)
			msgs[i] = consume.Message{ID: fmt.Sprintf("probe-%d-%d", time.Now().UnixNano(), n), Body: fmt.Appendf(nil, `{"seq":%d}`, n)}
		}
		start := time.Now()
		if _, err := c.sink.Store(context.WithoutCancel(ctx), msgs); err != nil {
			continue
		}
		d := time.Since(start)
		c.mu.Lock()
		c.per = append(c.per, d.Seconds()*1000/10)
		c.msgs += 10
		c.mu.Unlock()
	}
}

func (c *probeConsumers) reset() {
	c.mu.Lock()
	c.per, c.msgs = nil, 0
	c.mu.Unlock()
}

func (c *probeConsumers) stats() (msgs int, mean, p50, p90 float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.per) == 0 {
		return 0, 0, 0, 0
	}
	x := append([]float64(nil), c.per...)
	sort.Float64s(x)
	var sum float64
	for _, v := range x {
		sum += v
	}
	return c.msgs, sum / float64(len(x)), x[len(x)/2], x[len(x)*9/10]
}

// hostBusy is the host's busy and total jiffies (/proc/stat's cpu line).
func hostBusy() [2]float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return [2]float64{}
	}
	line := strings.SplitN(string(b), "\n", 2)[0]
	var busy, total float64
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return [2]float64{busy, total}
}
