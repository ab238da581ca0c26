package consumers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/lambdaesm"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// CostRow is one lambda_cost row: what the SQS Lambda path bills per
// million messages stored at an allowed rate, against the unpaced floor.
type CostRow struct {
	Path string `json:"path"`
	// Mode is "paced" (the mapping's MaximumConcurrency set by
	// loop.MappingConcurrency from the allowed rate and the measured batch)
	// or "fixed" (left at the unpaced concurrency, every instance pacing
	// by sleeping: what the mapping costs when its concurrency does not
	// follow the allowed rate).
	Mode string `json:"mode"`
	// RatePct is the allowed rate in % of what the unpaced path drained.
	RatePct  float64 `json:"rate_pct"`
	Allowed  float64 `json:"allowed"`
	Achieved float64 `json:"achieved"`
	ErrorPct float64 `json:"error_pct"`
	// Concurrency is the mapping's MaximumConcurrency.
	Concurrency int `json:"concurrency"`
	// GBsPerMillion is the billed GB-seconds per million messages stored;
	// UnpacedGBsPerMillion the same unpaced (the floor: time spent
	// working); Ratio the first over the second.
	GBsPerMillion        float64 `json:"gb_s_per_million"`
	UnpacedGBsPerMillion float64 `json:"unpaced_gb_s_per_million"`
	Ratio                float64 `json:"ratio"`
	Invocations          int64   `json:"invocations"`
	// BatchSeconds and BatchSize are the unpaced means the rule used.
	BatchSeconds float64 `json:"batch_seconds"`
	BatchSize    float64 `json:"batch_size"`
	MemoryMB     int     `json:"memory_mb"`
}

// CostOptions size the lambda_cost scenario.
type CostOptions struct {
	// Emulators is the unpaced concurrency: one RIE (one Lambda instance)
	// each (default 30).
	Emulators int
	// StoreLatency is the destination's answer time per message (an HTTP
	// service; default 500 ms; the sink sends 8 requests of a batch at once, so a batch of 10 takes about 1 s).
	StoreLatency time.Duration
	// Points are the allowed rates as fractions of the unpaced drain
	// (default 0.1 and 0.5).
	Points []float64
	// Warmup precedes each measured Window (defaults 25 s and 60 s; the
	// warm-up must outlast a lease's TTL, 15 s, so that instances the
	// mapping stopped no longer count as peers).
	Warmup, Window time.Duration
	// MemoryMB is the function's memory (default 256, the template's).
	MemoryMB int
}

func (o CostOptions) withDefaults() CostOptions {
	o.Emulators = defaults.Positive(o.Emulators, 30)
	o.StoreLatency = defaults.Positive(o.StoreLatency, 500*time.Millisecond)
	if len(o.Points) == 0 {
		o.Points = []float64{0.1, 0.5}
	}
	o.Warmup = defaults.Positive(o.Warmup, 25*time.Second)
	o.Window = defaults.Positive(o.Window, 60*time.Second)
	o.MemoryMB = defaults.Positive(o.MemoryMB, 256)
	return o
}

// costRig is the running scenario: the queue, the destination, the
// emulators behind a Fleet that follows a mapping on the local endpoint.
type costRig struct {
	e      Env
	o      CostOptions
	st     *Stack
	stored atomic.Int64
	fleet  *localaws.Fleet
	scaler *lambdaesm.Scaler
	uuid   string
}

// LambdaCost measures the billed GB-seconds per million messages of the SQS
// Lambda path (the real bootstrap under the RIE, one per instance, behind
// localaws.Fleet, which runs at most the MaximumConcurrency of a mapping on
// the local endpoint) into an HTTP destination that answers in
// StoreLatency: unpaced first (RATE far above what it drains), then at each
// point of that drain with the mapping's concurrency set by the rule
// (paced) and left at the unpaced value (fixed).
func LambdaCost(ctx context.Context, e Env, o CostOptions) ([]CostRow, error) {
	o = o.withDefaults()
	r := &costRig{e: e, o: o}
	stop, err := r.start(ctx)
	defer stop()
	if err != nil {
		return nil, err
	}
	unpaced, err := r.measure(ctx, 1e6, o.Emulators)
	if err != nil {
		return nil, err
	}
	drain := unpaced.Achieved
	floor := unpaced.GBsPerMillion
	batchSec := unpaced.Billed().Seconds() / float64(max(unpaced.bill.Invocations, 1))
	batchSize := float64(unpaced.bill.Messages) / float64(max(unpaced.bill.Invocations, 1))
	e.Log.Info("lambda_cost unpaced", "drain", drain, "gb_s_per_million", floor, "batch_seconds", batchSec, "batch_size", batchSize)
	var rows []CostRow
	for _, p := range o.Points {
		rate := p * drain
		for _, mode := range []string{"paced", "fixed"} {
			n := o.Emulators
			if mode == "paced" {
				n = loop.MappingConcurrency(rate, batchSec, batchSize, loop.MappingHeadroom)
			}
			m, err := r.measure(ctx, rate, n)
			if err != nil {
				return rows, err
			}
			row := CostRow{Path: "sqs-lambda", Mode: mode, RatePct: 100 * p, Allowed: rate, Achieved: m.Achieved,
				ErrorPct: 100 * (m.Achieved - rate) / rate, Concurrency: n, GBsPerMillion: m.GBsPerMillion,
				UnpacedGBsPerMillion: floor, Ratio: m.GBsPerMillion / floor, Invocations: m.bill.Invocations,
				BatchSeconds: batchSec, BatchSize: batchSize, MemoryMB: o.MemoryMB}
			e.Log.Info("lambda_cost", "row", row)
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// costWindow is one measured window.
type costWindow struct {
	bill          localaws.Billing
	Achieved      float64
	GBsPerMillion float64
}

// Billed is the window's billed time.
func (w costWindow) Billed() time.Duration { return w.bill.Billed }

// start builds and starts everything; stop undoes it.
func (r *costRig) start(ctx context.Context) (func(), error) {
	var undo []func()
	stop := func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	prefix := fmt.Sprintf("sl-cost-%d", time.Now().UnixNano())
	st, err := r.e.NewStack(ctx, prefix, 1e6, 10)
	if err != nil {
		return stop, err
	}
	r.st = st
	undo = append(undo, st.Close)
	dest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		time.Sleep(r.o.StoreLatency)
		r.stored.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	undo = append(undo, dest.Close)
	if err := r.mapping(ctx, prefix, &undo); err != nil {
		return stop, err
	}
	if err := r.emulators(ctx, prefix, dest.URL, &undo); err != nil {
		return stop, err
	}
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { r.fleet.Run(fctx); close(done) }()
	go r.produce(fctx)
	undo = append(undo, func() { cancel(); <-done })
	return stop, nil
}

// mapping creates the event source mapping on the local endpoint (moto).
func (r *costRig) mapping(ctx context.Context, prefix string, undo *[]func()) error {
	cfg, err := r.e.aws(ctx)
	if err != nil {
		return err
	}
	api := lambda.NewFromConfig(cfg)
	uuid, del, err := localaws.CreateMapping(ctx, r.e.AWSEndpoint, api, prefix, r.o.Emulators)
	*undo = append(*undo, del)
	r.uuid, r.scaler = uuid, lambdaesm.New(api)
	return err
}

// emulators builds the bootstrap and starts one RIE per instance behind
// the fleet.
func (r *costRig) emulators(ctx context.Context, prefix, dest string, undo *[]func()) error {
	bin, err := r.e.Build(ctx, "./functions/sqs-consumer", "bootstrap")
	if err != nil {
		return err
	}
	logf, err := os.Create(filepath.Join(r.e.WorkDir, prefix+".log"))
	if err != nil {
		return err
	}
	*undo = append(*undo, func() { logf.Close() })
	r.fleet = &localaws.Fleet{Every: time.Second, MemoryMB: r.o.MemoryMB,
		Concurrency: localaws.MappingConcurrency(r.scaler, r.uuid)}
	for range r.o.Emulators {
		fn, err := r.e.StartRIE(ctx, bin, map[string]string{
			"SLUICE_LOOP": r.st.Loop, "SLUICE_TABLE": r.st.Table, "SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": dest,
			"SLUICE_DLQ_URL": r.st.DLQURL, "SLUICE_SAFE_RATE": "1", "SLUICE_CONSUMERS": strconv.Itoa(r.o.Emulators),
			"AWS_LAMBDA_FUNCTION_TIMEOUT": "30", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": strconv.Itoa(r.o.MemoryMB),
		}, logf)
		if err != nil {
			return err
		}
		*undo = append(*undo, fn.Stop)
		r.fleet.Pollers = append(r.fleet.Pollers, &localaws.Poller{API: r.st.SQS, Invoker: &localaws.RIE{URL: fn.URL},
			QueueURL: r.st.QueueURL, QueueARN: r.st.QueueARN, Region: localaws.DefaultRegion, BatchSize: 10, Wait: time.Second})
	}
	return nil
}

// produce keeps a backlog in the queue, so that every running instance is
// always handed full batches (the case pacing costs most).
func (r *costRig) produce(ctx context.Context) {
	for ctx.Err() == nil {
		n, err := InFlight(ctx, r.st.SQS, r.st.QueueURL)
		if err == nil && n < 3000 {
			Produce(ctx, r.st.SQS, r.st.QueueURL, 1000, 0)
			continue
		}
		_ = (consume.WallClock{}).Sleep(ctx, 200*time.Millisecond)
	}
}

// measure sets RATE and the mapping's concurrency, waits Warmup and
// measures one Window.
func (r *costRig) measure(ctx context.Context, rate float64, n int) (costWindow, error) {
	now := time.Now()
	if err := ddbstore.New(r.st.DDB, r.st.Table).WriteRate(ctx, protocol.Rate{Loop: r.st.Loop, PerSecond: rate, WrittenAt: now, ExpiresAt: now.Add(24 * time.Hour)}); err != nil {
		return costWindow{}, fmt.Errorf("write RATE: %w", err)
	}
	if err := r.scaler.SetMaximumConcurrency(ctx, r.uuid, n); err != nil {
		return costWindow{}, err
	}
	if err := sleepCtx(ctx, r.o.Warmup); err != nil {
		return costWindow{}, err
	}
	b0, s0, t0 := r.fleet.Billing(), r.stored.Load(), time.Now()
	if err := sleepCtx(ctx, r.o.Window); err != nil {
		return costWindow{}, err
	}
	b1, s1, t1 := r.fleet.Billing(), r.stored.Load(), time.Now()
	w := costWindow{bill: b1.Sub(b0), Achieved: float64(s1-s0) / t1.Sub(t0).Seconds()}
	if s1 > s0 {
		w.GBsPerMillion = w.bill.GBSeconds() / float64(s1-s0) * 1e6
	}
	r.e.Log.Info("lambda_cost window", "rate", rate, "concurrency", n, "running", r.fleet.Running(), "stored", s1-s0,
		"achieved", w.Achieved, "invocations", w.bill.Invocations, "billed_s", w.bill.Billed.Seconds(), "gb_s_per_million", w.GBsPerMillion)
	return w, nil
}
