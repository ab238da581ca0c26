package consumers

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// PacingPoint is one pacing measurement: the aggregate stored rate of n
// concurrent consumers over the windows after the first, against the
// allowed rate.
type PacingPoint struct {
	Consumers int     `json:"consumers"`
	Allowed   float64 `json:"allowed"`
	Achieved  float64 `json:"achieved"`
	ErrorPct  float64 `json:"error_pct"`
	// Highest marks the point run near the highest rate this machine
	// sustains.
	Highest bool `json:"highest,omitempty"`
}

// countingSink counts what its sink stored.
type countingSink struct {
	consume.Sink
	stored atomic.Int64
}

func (s *countingSink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	res, err := s.Sink.Store(ctx, msgs)
	if err == nil {
		n := 0
		for _, r := range res {
			if r.Outcome == consume.Stored {
				n++
			}
		}
		s.stored.Add(int64(n))
	}
	return res, err
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
	// Preload is how many messages to enqueue (default: enough for the run
	// at Allowed, or 2,000,000 when unlimited).
	Preload int
}

// Pace runs Consumers consumers on one in-memory queue, in real time, into
// Sink, and returns the aggregate stored rate over the measured windows.
func Pace(ctx context.Context, r PacingRun) (PacingPoint, error) {
	if r.Windows <= 0 {
		r.Windows = 1
	}
	pt := PacingPoint{Consumers: r.Consumers, Allowed: r.Allowed}
	total := time.Duration(r.Windows+1) * r.Window
	if r.Preload <= 0 {
		if math.IsInf(r.Allowed, 1) {
			r.Preload = 2_000_000
		} else {
			r.Preload = int(r.Allowed*total.Seconds()*1.3) + 1000
		}
	}
	q := memqueue.New()
	body := []byte(`{"seq":0,"order":"o","qty":1}`)
	for range r.Preload {
		q.Send(body)
	}
	rates, loopID := r.Rates, r.Loop
	if rates == nil {
		mem := memqueue.NewRates()
		loopID = "bench"
		mem.Put(loop.Rate{Loop: loopID, PerSecond: r.Allowed})
		rates = mem
	}
	sink := &countingSink{Sink: r.Sink}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for range r.Consumers {
		rc := consume.NewRateCache(consume.RateCacheConfig{Loop: loopID, SafeRate: 1}, rates, consume.FixedPeers(r.Consumers), consume.WallClock{}, nil, nil)
		c := consume.New(consume.Config{BatchSize: 10, Unpaced: r.Unpaced}, rc, sink, consume.WallClock{}, nil, nil)
		wg.Add(1)
		go func() { defer wg.Done(); c.Run(ctx, q) }()
	}
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	if err := sleep(r.Window); err != nil {
		return pt, err
	}
	from, t0 := sink.stored.Load(), time.Now()
	if err := sleep(time.Duration(r.Windows) * r.Window); err != nil {
		return pt, err
	}
	to, t1 := sink.stored.Load(), time.Now()
	cancel()
	wg.Wait()
	if ready, _, _, _ := q.Counts(); ready == 0 {
		return pt, fmt.Errorf("queue ran dry: preload %d too small", r.Preload)
	}
	pt.Achieved = float64(to-from) / t1.Sub(t0).Seconds()
	if !math.IsInf(r.Allowed, 1) {
		pt.ErrorPct = 100 * (pt.Achieved - r.Allowed) / r.Allowed
	}
	return pt, nil
}

// Overhead measures the throughput of consumers paced at an unlimited
// rate and unpaced, alternating A B A B on the same sink, and returns
// paced / unpaced.
func Overhead(ctx context.Context, consumers int, window time.Duration, sink func() consume.Sink) (ratio, paced, unpaced float64, err error) {
	var p, u float64
	for range 2 {
		for _, unp := range []bool{false, true} {
			pt, err := Pace(ctx, PacingRun{Consumers: consumers, Allowed: math.Inf(1), Window: window / 4, Windows: 4, Unpaced: unp, Sink: sink(), Preload: 0})
			if err != nil {
				return 0, 0, 0, err
			}
			if unp {
				u += pt.Achieved
			} else {
				p += pt.Achieved
			}
		}
	}
	return p / u, p / 2, u / 2, nil
}
