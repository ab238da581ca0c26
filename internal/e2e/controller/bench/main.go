// Command bench measures the controller (`make bench-controller`): AWS API
// calls per tick for 1, 100 and 1,000 loops against moto_server (counted by
// a middleware on the real SDK clients), the tick's time for 1,000 loops
// against in-memory stores, and the size of the arm64 bootstrap. It prints
// one JSON object as its last line and exits 1 when a target is missed
// (ceil(N/500) metric reads and one write per loop).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/memstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/metric"
)

type tickCalls struct {
	Backend       string         `json:"backend"`
	Loops         int            `json:"loops"`
	Tick          int            `json:"tick"`
	Applied       int            `json:"applied"`
	MetricReads   int            `json:"metric_reads"`
	StoreReads    int            `json:"store_reads"`
	Writes        int            `json:"writes"`
	Total         int            `json:"total"`
	WritesPerLoop float64        `json:"writes_per_loop"`
	ByOperation   map[string]int `json:"by_operation"`
	Seconds       float64        `json:"seconds"`
}

type result struct {
	APICallsPerTick      []tickCalls `json:"api_calls_per_tick"`
	HandlerNsPerTick1000 int64       `json:"handler_ns_per_tick_1000_loops"`
	HandlerAllocs1000    int64       `json:"handler_allocs_per_tick_1000_loops"`
	BootstrapBytes       int64       `json:"bootstrap_bytes"`
	OK                   bool        `json:"ok"`
	Failures             []string    `json:"failures"`
}

func main() {
	bootstrap := flag.String("bootstrap", "bin/controller-arm64/bootstrap", "arm64 bootstrap whose size is reported")
	motoLoops := flag.String("moto-loops", "1,100", "loop counts measured on moto_server (comma-separated; moto slows down with the table's size)")
	flag.Parse()
	var sizes []int
	for _, f := range strings.Split(*motoLoops, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			fmt.Fprintf(os.Stderr, "bench: -moto-loops %q: want positive integers\n", *motoLoops)
			os.Exit(2)
		}
		sizes = append(sizes, n)
	}
	res := result{Failures: []string{}}
	if err := run(&res, *bootstrap, sizes); err != nil {
		res.Failures = append(res.Failures, err.Error())
	}
	res.OK = len(res.Failures) == 0
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	if !res.OK {
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench-controller] "+format+"\n", args...)
}

func run(res *result, bootstrap string, motoSizes []int) error {
	fi, err := os.Stat(bootstrap)
	if err != nil {
		return fmt.Errorf("bootstrap: %w", err)
	}
	res.BootstrapBytes = fi.Size()

	ns, allocs := handlerTime(1000)
	res.HandlerNsPerTick1000, res.HandlerAllocs1000 = ns, allocs
	logf("handler, 1000 loops in memory: %d ns/tick, %d allocs/tick", ns, allocs)

	ctx := context.Background()
	logDir, err := os.MkdirTemp("", "bench-controller-")
	if err != nil {
		return err
	}
	moto, err := harness.StartMoto(ctx, os.Getenv("SLUICE_MOTO_BIN"), logDir)
	if err != nil {
		return err
	}
	defer moto.Stop()
	for _, kv := range moto.Env() {
		k, v, _ := cutEnv(kv)
		os.Setenv(k, v)
	}
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return err
	}
	counter := harness.NewCounter()
	ddb := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, counter.APIOption) })
	cw := cwmetric.NewClient(cfg, moto.Endpoint)
	cwCounted := cloudwatch.NewFromConfig(cfg, func(o *cloudwatch.Options) {
		o.BaseEndpoint = aws.String(moto.Endpoint)
		o.Protocol = cw.Options().Protocol
		o.DisableRequestCompression = true
		o.APIOptions = append(o.APIOptions, counter.APIOption)
	})

	// moto_server for 1 and 100 loops: real SDK clients, calls counted by a
	// middleware. In-process fakes with DynamoDB's and CloudWatch's limits
	// for 1, 100 and 1,000 loops: moto_server copies its tables for every
	// transaction and takes many minutes per tick at 1,000 loops.
	for _, n := range motoSizes {
		table := fmt.Sprintf("bench-%d", n)
		if err := ddbstore.CreateTable(ctx, ddb, table); err != nil {
			return err
		}
		store := ddbloop.New(ddb, table)
		if err := seed(ctx, store, cw, n, time.Now()); err != nil {
			return err
		}
		counter.Counts() // forget the seeding
		measure(ctx, res, "moto", n, store, cwmetric.New(cwCounted), counter.Counts)
	}
	for _, n := range []int{1, 100, 1000} {
		fd, fcw := newFakeDynamo(), &fakeCloudWatch{}
		store := ddbloop.New(fd, "bench")
		if err := seed(ctx, store, nil, n, time.Now()); err != nil {
			return err
		}
		fd.calls.Counts()
		measure(ctx, res, "fake", n, store, cwmetric.New(fcw), func() map[string]int {
			c := fd.calls.Counts()
			if n := fcw.takeCalls(); n > 0 {
				c["CloudWatch.GetMetricData"] = n
			}
			return c
		})
	}
	return nil
}

// measure runs two ticks of n loops and records the API calls of each.
func measure(ctx context.Context, res *result, backend string, n int, store *ddbloop.Store, reader metric.Reader, calls func() map[string]int) {
	now := time.Now()
	tk := &loop.Ticker{Sources: looptest.Sources(),
		Store:   store,
		Metrics: map[string]metric.Reader{cwmetric.Name: reader},
		Now:     func() time.Time { return now },
	}
	for tick := 1; tick <= 2; tick++ {
		t0 := time.Now()
		reports, err := tk.Tick(ctx)
		if err != nil {
			res.Failures = append(res.Failures, fmt.Sprintf("%s %d loops tick %d: %v", backend, n, tick, err))
			return
		}
		tc := tickCalls{Backend: backend, Loops: n, Tick: tick, ByOperation: calls(), Seconds: time.Since(t0).Seconds()}
		for _, r := range reports {
			if r.Outcome == loop.OutcomeApplied {
				tc.Applied++
			}
		}
		for op, c := range tc.ByOperation {
			tc.Total += c
			switch op {
			case "CloudWatch.GetMetricData":
				tc.MetricReads += c
			case "DynamoDB.Query", "DynamoDB.BatchGetItem", "DynamoDB.GetItem":
				tc.StoreReads += c
			default:
				tc.Writes += c
			}
		}
		tc.WritesPerLoop = float64(tc.Writes) / float64(n)
		res.APICallsPerTick = append(res.APICallsPerTick, tc)
		logf("%s, %4d loops, tick %d: %d applied, calls %v (%.2fs)", backend, n, tick, tc.Applied, tc.ByOperation, tc.Seconds)
		if want := (n + cwmetric.MaxQueriesPerCall - 1) / cwmetric.MaxQueriesPerCall; tc.MetricReads != want {
			res.Failures = append(res.Failures, fmt.Sprintf("%s %d loops: %d metric reads; want %d", backend, n, tc.MetricReads, want))
		}
		if tc.Applied != n || tc.Writes != n {
			res.Failures = append(res.Failures, fmt.Sprintf("%s %d loops tick %d: %d applied, %d writes; want %d each", backend, n, tick, tc.Applied, tc.Writes, n))
		}
		now = now.Add(time.Minute)
	}
}

func cutEnv(kv string) (string, string, bool) {
	for i := range kv {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// seed writes n loops' PARAMS and, with cw, a CPU datapoint for each.
func seed(ctx context.Context, store *ddbloop.Store, cw *cloudwatch.Client, n int, now time.Time) error {
	at := now.Add(-2 * time.Minute)
	var data []cwtypes.MetricDatum
	flush := func() error {
		if len(data) == 0 || cw == nil {
			return nil
		}
		_, err := cw.PutMetricData(ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String("AWS/RDS"), MetricData: data})
		data = data[:0]
		return err
	}
	for i := range n {
		db := fmt.Sprintf("bench-db-%04d", i)
		p := map[string]any{"setpoint": 70.0, "kp": 1.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 2000.0,
			"metric_dimensions": map[string]any{"DBInstanceIdentifier": db}}
		if err := store.WriteParams(ctx, fmt.Sprintf("loop-%04d", i), p); err != nil {
			return err
		}
		data = append(data, cwtypes.MetricDatum{MetricName: aws.String("CPUUtilization"), Value: aws.Float64(40 + float64(i%50)),
			Timestamp: aws.Time(at), Dimensions: []cwtypes.Dimension{{Name: aws.String("DBInstanceIdentifier"), Value: aws.String(db)}}})
		if len(data) == 500 {
			if err := flush(); err != nil {
				return fmt.Errorf("PutMetricData: %w", err)
			}
		}
	}
	if err := flush(); err != nil {
		return fmt.Errorf("PutMetricData: %w", err)
	}
	return nil
}

// handlerTime is one tick of n loops against the in-memory store.
func handlerTime(n int) (nsPerOp, allocsPerOp int64) {
	store := memstore.New()
	for i := range n {
		p := map[string]any{"setpoint": 70.0, "kp": 1.0, "ki": 0.05, "min_rate": 10.0, "max_rate": 2000.0,
			"ff_gain": 0.05, "ff_base": 10.0, "ff_tau": "15s", "ff_dead_time": "5s", "setpoint_filter": "2m",
			"metric_dimensions": map[string]any{"DBInstanceIdentifier": fmt.Sprintf("db-%d", i)}}
		_ = store.WriteParams(context.Background(), fmt.Sprintf("loop-%04d", i), p)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tk := &loop.Ticker{Sources: looptest.Sources(), Store: store, Metrics: map[string]metric.Reader{cwmetric.Name: looptest.Metrics{Value: 55, Delay: 90 * time.Second}},
		Now: func() time.Time { return now }}
	r := testing.Benchmark(func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(time.Minute)
			if _, err := tk.Tick(context.Background()); err != nil {
				b.Fatal(err)
			}
		}
	})
	return r.NsPerOp(), r.AllocsPerOp()
}
