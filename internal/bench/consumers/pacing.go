package consumers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/unpaced"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// PacingPoint is one pacing measurement: the aggregate stored rate of n
// concurrent consumers over the windows after the first, against the
// allowed rate.
type PacingPoint struct {
	// Path names what was paced: "in-process" (consume.Consumer.Run, the
	// worker's loop, on an endless in-memory source), or a real path such as
	// "kafka-lambda".
	Path      string  `json:"path"`
	Consumers int     `json:"consumers"`
	Allowed   float64 `json:"allowed"`
	Achieved  float64 `json:"achieved"`
	ErrorPct  float64 `json:"error_pct"`
	// Highest marks the point run near the highest rate this machine
	// sustains.
	Highest bool `json:"highest,omitempty"`
}

// PacingRun configures one measurement.
type PacingRun struct {
	Consumers int
	// Allowed is the aggregate rate (math.Inf(1): unlimited).
	Allowed float64
	// Window is the measuring window; the first window is warm-up, then
	// Windows windows are measured.
	Window  time.Duration
	Windows int
	// Unpaced removes pacing (overhead baseline).
	Unpaced bool
	// Sink is where messages go (shared by the consumers).
	Sink consume.Sink
	// Rates is the RATE store the consumers read; nil: in memory.
	Rates consume.RateReader
	// Loop is the RATE item's loop id when Rates is given.
	Loop string
}

// endless is a source with an endless backlog: Receive makes messages, Ack
// and Release count. It keeps the source's cost out of the measurement.
type endless struct {
	next, acked, released atomic.Int64
	body                  []byte
	prefix                string // unique per run: every message is new to the sink
}

var _ consume.Source = (*endless)(nil)

func (e *endless) Receive(ctx context.Context, max int) ([]consume.Message, error) {
	if ctx.Err() != nil {
		return nil, nil
	}
	out := make([]consume.Message, max)
	for i := range out {
		out[i] = consume.Message{ID: e.prefix + strconv.FormatInt(e.next.Add(1), 10), Body: e.body}
	}
	return out, nil
}

func (e *endless) Ack(_ context.Context, m []consume.Message) error {
	e.acked.Add(int64(len(m)))
	return nil
}

func (e *endless) Release(_ context.Context, m []consume.Message) error {
	e.released.Add(int64(len(m)))
	return nil
}

// Pace runs Consumers consumers on one endless source, in real time, into
// Sink, and returns the aggregate stored rate over the measured windows.
func Pace(ctx context.Context, r PacingRun) (PacingPoint, error) {
	r.Windows = defaults.Positive(r.Windows, 1)
	pt := PacingPoint{Path: "in-process", Consumers: r.Consumers, Allowed: r.Allowed}
	q := &endless{body: []byte(`{"seq":0,"order":"o","qty":1}`), prefix: fmt.Sprintf("r%d-", time.Now().UnixNano())}
	rates, loopID := r.Rates, r.Loop
	if rates == nil {
		mem := memqueue.NewRates()
		loopID = "bench"
		mem.Put(protocol.Rate{Loop: loopID, PerSecond: r.Allowed})
		rates = mem
	}
	sink := &consumetest.CountingSink{Sink: r.Sink}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range r.Consumers {
		rc := consume.NewRateCache(consume.RateCacheConfig{Loop: loopID, SafeRate: 1}, rates, consume.FixedPeers(r.Consumers), consume.WallClock{}, nil, nil)
		c := consume.New(consume.Config{BatchSize: 10}, rc, sink, consume.WallClock{}, nil, nil)
		runCtx := ctx
		if r.Unpaced {
			runCtx = unpaced.Context(ctx)
		}
		wg.Add(1)
		go func() { defer wg.Done(); c.Run(runCtx, q) }()
	}
	achieved, to, err := MeasureRate(ctx, r.Window, r.Windows, func() int64 { return sink.Stored() })
	if err != nil {
		return pt, err
	}
	cancel()
	wg.Wait()
	if acked := q.acked.Load(); acked < to {
		return pt, fmt.Errorf("acknowledged %d of %d stored", acked, to)
	}
	pt.Achieved = achieved
	if !math.IsInf(r.Allowed, 1) {
		pt.ErrorPct = 100 * (pt.Achieved - r.Allowed) / r.Allowed
	}
	return pt, nil
}

// MeasureRate waits out a first window (the start), then returns how fast
// count grew over the next windows windows, per second, and count at their
// end.
func MeasureRate(ctx context.Context, window time.Duration, windows int, count func() int64) (rate float64, end int64, err error) {
	if err := sleepCtx(ctx, window); err != nil {
		return 0, 0, err
	}
	from, t0 := count(), time.Now()
	if err := sleepCtx(ctx, time.Duration(windows)*window); err != nil {
		return 0, 0, err
	}
	end, t1 := count(), time.Now()
	return float64(end-from) / t1.Sub(t0).Seconds(), end, nil
}

// Overhead measures the throughput of consumers paced at an unlimited
// rate and of the same number of unpaced consumers, running at the same
// time on the same kind of sink (each its own sink value), so that both see
// the same load from the rest of the machine; it repeats this rounds times
// and returns paced / unpaced over all rounds. (Measuring one after the
// other on a shared 2-core machine gave ratios from 0.82 to 1.38: the
// drift of the machine's load, not pacing.)
func Overhead(ctx context.Context, consumers, rounds int, window time.Duration, sink func() consume.Sink) (ratio, paced, unpaced float64, err error) {
	var p, u float64
	for range rounds {
		var wg sync.WaitGroup
		var pp, up PacingPoint
		var perr, uerr error
		wg.Add(2)
		go func() {
			defer wg.Done()
			pp, perr = Pace(ctx, PacingRun{Consumers: consumers, Allowed: math.Inf(1), Window: window / 4, Windows: 4, Sink: sink()})
		}()
		go func() {
			defer wg.Done()
			up, uerr = Pace(ctx, PacingRun{Consumers: consumers, Allowed: math.Inf(1), Window: window / 4, Windows: 4, Unpaced: true, Sink: sink()})
		}()
		wg.Wait()
		if perr != nil || uerr != nil {
			return 0, 0, 0, errors.Join(perr, uerr)
		}
		p += pp.Achieved
		u += up.Achieved
	}
	return p / u, p / float64(rounds), u / float64(rounds), nil
}

// NullSink stores nothing and reports every message stored: the cheapest
// possible destination, which makes the cost of pacing most visible.
type NullSink struct{}

var _ consume.Sink = NullSink{}

// Store reports every message stored.
func (NullSink) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	return make([]consume.Result, len(msgs)), nil
}
