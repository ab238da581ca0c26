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
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// LatencyLoad is one phase of a latency probe: an external load run beside
// the consumers (QPS 0 with no workers: none; QPS +Inf: as fast as the
// workers go).
type LatencyLoad struct {
	Name    string
	QPS     float64
	Workers int
}

// DefaultLatencyLoads are the phases `sluice lab latency-mariadb` runs: none,
// two paced loads, unpaced loads on 1 to 8 connections, none again.
func DefaultLatencyLoads() []LatencyLoad {
	return []LatencyLoad{
		{"none", 0, 0},
		{"paced 12 q/s, 4 conns", 12, 4},
		{"paced 18 q/s, 4 conns", 18, 4},
		{"unpaced, 1 conn", math.Inf(1), 1},
		{"unpaced, 2 conns", math.Inf(1), 2},
		{"unpaced, 4 conns", math.Inf(1), 4},
		{"unpaced, 8 conns", math.Inf(1), 8},
		{"none", 0, 0},
	}
}

// LatencyRow is what one phase of a latency probe measured: the database
// server's CPU and the host's, the external load's queries/s, the
// consumers' stored messages/s and their store time per message.
type LatencyRow struct {
	Load    string  `json:"load"`
	CPU     float64 `json:"cpu_pct"`
	Host    float64 `json:"host_pct"`
	QPS     float64 `json:"qps"`
	MsgRate float64 `json:"msg_per_s"`
	Batches int     `json:"batches"`
	MeanMs  float64 `json:"mean_ms"`
	P50Ms   float64 `json:"p50_ms"`
	P90Ms   float64 `json:"p90_ms"`
}

// LatencyProbe measures the consumers' store latency per message against
// the database's CPU under external loads of different shapes: Consumers
// goroutines store batches of 10 through mysqlsink at MsgRate in total on
// Plant's workload, and each of Loads runs for Phase beside them (after 3 s
// for its queue to form). It is what the inner loop of pkg/consume reads,
// measured on the real database (docs/consumers.md, "On MariaDB").
type LatencyProbe struct {
	Plant     *RealPlant
	MsgRate   float64
	Consumers int
	Phase     time.Duration
	Loads     []LatencyLoad
	// Progress, when set, is told each row as it is measured.
	Progress func(LatencyRow)
}

// Run runs the probe's phases in order and returns their rows.
func (p LatencyProbe) Run(ctx context.Context) ([]LatencyRow, error) {
	if p.MsgRate <= 0 || p.Consumers <= 0 || p.Phase <= 0 {
		return nil, fmt.Errorf("latency probe: rate %g, consumers %d, phase %v: each must be positive", p.MsgRate, p.Consumers, p.Phase)
	}
	cons := &probeConsumers{sink: mysqlsink.New(p.Plant.DB), lim: rate.NewLimiter(rate.Limit(p.MsgRate), 10)}
	cctx, stop := context.WithCancel(ctx)
	defer func() { stop(); cons.wg.Wait() }()
	for range p.Consumers {
		cons.wg.Add(1)
		go cons.run(cctx)
	}
	rows := make([]LatencyRow, 0, len(p.Loads))
	for _, l := range p.Loads {
		row, err := p.phase(ctx, cons, l)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row)
		if p.Progress != nil {
			p.Progress(row)
		}
	}
	return rows, nil
}

// phase runs load l beside the consumers for p.Phase and measures it.
func (p LatencyProbe) phase(ctx context.Context, cons *probeConsumers, l LatencyLoad) (LatencyRow, error) {
	var gen *LoadGenerator
	if l.Workers > 0 {
		gen = &LoadGenerator{DB: p.Plant.DB, Rate: min(l.QPS, 1e6), ScanRows: p.Plant.ScanRows, DataRows: p.Plant.DataRows, Workers: l.Workers}
		if err := gen.Start(ctx); err != nil {
			return LatencyRow{}, err
		}
		defer gen.Stop()
	}
	if !sleepCtx(ctx, 3*time.Second) { // let the phase's queue form
		return LatencyRow{}, ctx.Err()
	}
	cons.reset()
	s0, err := p.Plant.CPU.Sample()
	if err != nil {
		return LatencyRow{}, err
	}
	h0 := hostBusy()
	var q0 int64
	if gen != nil {
		q0, _ = gen.Queries()
	}
	if !sleepCtx(ctx, p.Phase) {
		return LatencyRow{}, ctx.Err()
	}
	s1, err := p.Plant.CPU.Sample()
	if err != nil {
		return LatencyRow{}, err
	}
	h1 := hostBusy()
	row := LatencyRow{Load: l.Name, Host: 100 * (h1[0] - h0[0]) / math.Max(h1[1]-h0[1], 1e-9)}
	row.CPU, _ = p.Plant.CPU.Utilization(s0, s1)
	if gen != nil {
		q1, _ := gen.Queries()
		row.QPS = float64(q1-q0) / p.Phase.Seconds()
	}
	var msgs int
	msgs, row.Batches, row.MeanMs, row.P50Ms, row.P90Ms = cons.stats()
	row.MsgRate = float64(msgs) / p.Phase.Seconds()
	return row, nil
}

// sleepCtx sleeps d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
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
		c.record(time.Since(start), len(msgs))
	}
}

// record adds one stored batch of n messages that took d.
func (c *probeConsumers) record(d time.Duration, n int) {
	c.mu.Lock()
	c.per = append(c.per, d.Seconds()*1000/float64(n))
	c.msgs += n
	c.mu.Unlock()
}

func (c *probeConsumers) reset() {
	c.mu.Lock()
	c.per, c.msgs = nil, 0
	c.mu.Unlock()
}

// stats is what was recorded since the last reset: the messages, the
// batches, and the mean, median and 90th percentile of the time per message
// in milliseconds (all 0 with nothing recorded).
func (c *probeConsumers) stats() (msgs, batches int, mean, p50, p90 float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.per) == 0 {
		return 0, 0, 0, 0, 0
	}
	x := append([]float64(nil), c.per...)
	sort.Float64s(x)
	var sum float64
	for _, v := range x {
		sum += v
	}
	return c.msgs, len(x), sum / float64(len(x)), x[len(x)/2], x[len(x)*9/10]
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
