package consumers

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// ScalingPoint is one phase of a scaling run: the aggregate stored rate of
// the instances running in the phase against the allowed rate.
type ScalingPoint struct {
	Phase     int     `json:"phase"`
	Consumers int     `json:"consumers"`
	Allowed   float64 `json:"allowed"`
	Achieved  float64 `json:"achieved"`
	ErrorPct  float64 `json:"error_pct"`
}

// ScalingRun configures a run whose consumer instances come and go, as a
// Lambda event source mapping scales: each instance keeps a lease
// (consume.Lease) and paces itself to RATE / live instances.
type ScalingRun struct {
	// Phases are the instance counts, in order (e.g. 1, 8, 3).
	Phases []int
	// Allowed is the aggregate rate.
	Allowed float64
	// Settle is the time after a change before the phase is measured
	// (default two lease periods and a second); Window the time measured.
	Settle, Window time.Duration
	// LeaseEvery is the instances' lease period (consume.DefaultLeaseEvery
	// when 0).
	LeaseEvery time.Duration
	// Sink is where the instances store (shared).
	Sink consume.Sink
	// Store holds RATE and the leases; nil: in memory.
	Store ScalingStore
	// Loop is the loop id (default "bench-scaling").
	Loop string
}

// ScalingStore is where a scaling run writes RATE and the instances keep
// their leases: memstore, or ddbstore on a real table.
type ScalingStore interface {
	consume.RateReader
	consume.PeerStore
	WriteRate(ctx context.Context, r protocol.Rate) error
}

// instance is one running consumer of a scaling run.
type instance struct {
	cancel context.CancelFunc
	done   chan struct{}
	lease  *consume.Lease
}

// Scale runs r's phases in real time and returns one point per phase.
// Instances that leave stop cleanly (the batch in hand settled, the lease
// closed), as a worker does on SIGTERM.
func Scale(ctx context.Context, r ScalingRun) ([]ScalingPoint, error) {
	r = r.withDefaults()
	if err := r.Store.WriteRate(ctx, protocol.Rate{Loop: r.Loop, PerSecond: r.Allowed, WrittenAt: time.Now()}); err != nil {
		return nil, fmt.Errorf("write RATE: %w", err)
	}
	q := &endless{body: []byte(`{"seq":0,"order":"o","qty":1}`), prefix: fmt.Sprintf("s%d-", time.Now().UnixNano())}
	sink := &consumetest.CountingSink{Sink: r.Sink}
	var running []*instance
	defer func() {
		for _, in := range running {
			in.stop()
		}
	}()
	var out []ScalingPoint
	for i, n := range r.Phases {
		for len(running) < n {
			running = append(running, r.start(ctx, q, sink))
		}
		for len(running) > n {
			running[len(running)-1].stop()
			running = running[:len(running)-1]
		}
		if err := sleepCtx(ctx, r.Settle); err != nil {
			return out, err
		}
		from, t0 := sink.Stored(), time.Now()
		if err := sleepCtx(ctx, r.Window); err != nil {
			return out, err
		}
		got := float64(sink.Stored()-from) / time.Since(t0).Seconds()
		out = append(out, ScalingPoint{Phase: i + 1, Consumers: n, Allowed: r.Allowed, Achieved: got,
			ErrorPct: 100 * (got - r.Allowed) / r.Allowed})
	}
	return out, nil
}

func (r ScalingRun) withDefaults() ScalingRun {
	if r.Loop == "" {
		r.Loop = "bench-scaling"
	}
	r.LeaseEvery = defaults.Positive(r.LeaseEvery, consume.DefaultLeaseEvery)
	r.Settle = defaults.Positive(r.Settle, 2*r.LeaseEvery+time.Second)
	if r.Store == nil {
		r.Store = memstore.New()
	}
	return r
}

// start starts one instance with its lease.
func (r ScalingRun) start(ctx context.Context, q consume.Source, sink consume.Sink) *instance {
	ctx, cancel := context.WithCancel(ctx)
	stats := &consume.Stats{}
	lease := consume.NewLease(consume.LeaseConfig{Loop: r.Loop, Every: r.LeaseEvery}, r.Store, stats, consume.WallClock{}, nil)
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: r.Loop, SafeRate: 1}, r.Store, lease, consume.WallClock{}, nil, stats)
	c := consume.New(consume.Config{BatchSize: 10}, rc, sink, consume.WallClock{}, nil, stats)
	in := &instance{cancel: cancel, done: make(chan struct{}), lease: lease}
	go func() { defer close(in.done); _ = c.Run(ctx, q) }()
	return in
}

// stop stops the instance and closes its lease.
func (in *instance) stop() {
	in.cancel()
	<-in.done
	cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = in.lease.Close(cctx) // a lease that stays lapses by its TTL
}

// sleepCtx waits d or until ctx ends.
var sleepCtx = consume.WallClock{}.Sleep

// MaxScalingError is the largest |error| of points, percent.
func MaxScalingError(points []ScalingPoint) (float64, error) {
	if len(points) == 0 {
		return 0, errors.New("no scaling points")
	}
	m := 0.0
	for _, p := range points {
		m = math.Max(m, math.Abs(p.ErrorPct))
	}
	return m, nil
}

// ScalingTable creates a table named after prefix on the real DynamoDB
// endpoint (moto_server or LocalStack) for a scaling run: RATE and the
// leases then go through ddbstore as in production.
func (e Env) ScalingTable(ctx context.Context, prefix string) (ScalingStore, error) {
	cfg, err := e.aws(ctx)
	if err != nil {
		return nil, err
	}
	client := dynamodb.NewFromConfig(cfg)
	table := prefix + "-table"
	if err := ddbstore.CreateTable(ctx, client, table); err != nil {
		return nil, fmt.Errorf("create table: %w", err)
	}
	return ddbstore.New(client, table), nil
}
