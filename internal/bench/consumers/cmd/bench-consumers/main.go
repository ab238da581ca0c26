// Command bench-consumers measures the consumers and prints, as its last
// line, one JSON object: pacing accuracy of 1, 4 and 8 concurrent consumers
// at 10, 100 and 1,000 messages/s and near the highest rate the machine
// sustains (real wall time, aggregate stored rate over the windows after the
// first); the overhead ratio of pacing (paced at an unlimited rate over
// unpaced, same sink, same run); the scaling row (instances 1 -> 8 -> 3, each
// sharing RATE by the live leases in a DynamoDB table); and the no-loss scenarios (sqs-lambda,
// sqs-worker, kafka-worker, kafka-lambda) into MariaDB with faults.
//
// `make bench-consumers` starts the services (localstack/stack/up.sh), runs
// this with the environment of localstack/stack/env.sh, and stops what it
// started. The full run (60 s windows, 10,000 messages per no-loss path)
// takes about 30 minutes; --window=10s --messages=1000 is a quick run.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/bench/kafka"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// scenario is one no-loss path.
type scenario struct {
	path string
	run  func(context.Context, consumers.Env, consumers.Options) (consumers.NoLoss, error)
}

// scenarios lists the no-loss paths.
func scenarios() []scenario {
	return []scenario{
		{"sqs-lambda", consumers.SQSLambda},
		{"sqs-worker", consumers.SQSWorker},
		{kafka.Path, kafkaWorker},
		{kafka.LambdaPath, kafkaLambda},
	}
}

// kafkaWorker runs internal/bench/kafka's scenario (real worker processes on
// the real broker at $SLUICE_KAFKA_BROKERS, into MariaDB) as a no-loss row.
func kafkaWorker(ctx context.Context, e consumers.Env, o consumers.Options) (consumers.NoLoss, error) {
	bin, err := kafka.BuildWorker(ctx, e.Root, e.WorkDir)
	if err != nil {
		return consumers.NoLoss{Path: kafka.Path}, err
	}
	return kafkaNoLoss(ctx, e, o, kafka.Config{WorkerBin: bin})
}

// kafkaLambda runs the same scenario on the kafka-lambda path: the real
// kafka-consumer bootstrap under the emulator behind the emulated Kafka
// event source mapping (localaws.KafkaPoller).
func kafkaLambda(ctx context.Context, e consumers.Env, o consumers.Options) (consumers.NoLoss, error) {
	bin, err := kafka.BuildLambda(ctx, e.Root, e.WorkDir)
	if err != nil {
		return consumers.NoLoss{Path: kafka.LambdaPath}, err
	}
	return kafkaNoLoss(ctx, e, o, kafka.Config{Lambda: &kafka.Lambda{Bootstrap: bin, RIE: e.RIE}})
}

// kafkaNoLoss runs internal/bench/kafka's scenario with cfg's consumers
// and returns it as a no-loss row.
func kafkaNoLoss(ctx context.Context, e consumers.Env, o consumers.Options, cfg kafka.Config) (consumers.NoLoss, error) {
	brokers := os.Getenv("SLUICE_KAFKA_BROKERS")
	if brokers == "" {
		return consumers.NoLoss{}, errors.New("SLUICE_KAFKA_BROKERS is not set (start Kafka: localstack/stack/up.sh kafka)")
	}
	cfg.Brokers, cfg.DSN, cfg.MariaDBCtl, cfg.Log = strings.Split(brokers, ","), e.MySQLDSN, e.MariaDBCtl, e.Log
	cfg.Messages, cfg.PoisonEvery, cfg.Rate = o.Messages, o.PoisonEvery, o.Rate
	r, err := kafka.NoLoss(ctx, cfg)
	return r.NoLoss, err
}

// paceKafkaLambda adds the kafka-lambda pacing rows: the real bootstrap
// under the emulator behind one emulated mapping member per partition, on
// the real broker, into MariaDB. It returns false on a flag error.
func paceKafkaLambda(ctx context.Context, rateList, partList string, window time.Duration, windows int, res *result, fail func(string, ...any)) bool {
	rates, err := ints(rateList)
	if err != nil {
		fail("--kafka-lambda-rates: %v", err)
		return false
	}
	partitions, err := ints(partList)
	if err != nil {
		fail("--kafka-lambda-partitions: %v", err)
		return false
	}
	root, _ := os.Getwd()
	work, err := os.MkdirTemp("", "bench-kafka-lambda-")
	if err != nil {
		fail("kafka-lambda pacing: %v", err)
		return true
	}
	defer os.RemoveAll(work)
	brokers, rie := os.Getenv("SLUICE_KAFKA_BROKERS"), os.Getenv("SLUICE_RIE_BIN")
	if rie == "" {
		rie = filepath.Join(root, ".cache/bin/aws-lambda-rie")
	}
	bin, err := kafka.BuildLambda(ctx, root, work)
	if err != nil || brokers == "" {
		fail("kafka-lambda pacing: %v (SLUICE_KAFKA_BROKERS=%q)", err, brokers)
		return true
	}
	for _, n := range partitions {
		for _, r := range rates {
			pt, err := kafka.PaceLambda(ctx, kafka.Pacing{Window: window, Windows: windows, Config: kafka.Config{
				Brokers: strings.Split(brokers, ","), DSN: os.Getenv("SLUICE_MYSQL_DSN"), Partitions: int32(n), Rate: float64(r),
				Lambda: &kafka.Lambda{Bootstrap: bin, RIE: rie},
			}})
			if err != nil {
				fail("pacing kafka-lambda %d partitions at %d/s: %v", n, r, err)
				continue
			}
			res.Pacing = append(res.Pacing, consumers.PacingPoint{Path: pt.Path, Consumers: pt.Partitions, Allowed: pt.Allowed,
				Achieved: math.Round(pt.Achieved*100) / 100, ErrorPct: math.Round(pt.ErrorPct*100) / 100})
		}
	}
	return true
}

type result struct {
	Pacing        []consumers.PacingPoint  `json:"pacing"`
	Scaling       []consumers.ScalingPoint `json:"scaling,omitempty"`
	OverheadRatio float64                  `json:"overhead_ratio"`
	Overhead      map[string]float64       `json:"overhead"`
	NoLoss        []consumers.NoLoss       `json:"no_loss"`
	LambdaCost    []consumers.CostRow      `json:"lambda_cost,omitempty"`
	Window        string                   `json:"window"`
	Sink          string                   `json:"sink"`
	Errors        []string                 `json:"errors,omitempty"`
}

func ints(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q: %w", s, err)
		}
		out = append(out, n)
	}
	return out, nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench-consumers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	window := fs.Duration("window", 60*time.Second, "pacing window; the first is warm-up, then --windows are measured")
	windows := fs.Int("windows", 1, "measured windows per pacing point")
	rateList := fs.String("rates", "10,100,1000", "allowed rates, messages/s")
	consList := fs.String("consumers", "1,4,8", "concurrent consumer counts")
	sinkName := fs.String("sink", "mysql", "pacing and overhead sink: mysql (MariaDB) or null (stores nothing)")
	messages := fs.Int("messages", 10000, "messages per no-loss path")
	only := fs.String("only", "pacing,overhead,scaling,noloss,cost", "parts to run")
	scaleList := fs.String("scaling", "1,8,3", "instance counts of the scaling row's phases (live peers: each instance keeps a lease)")
	scaleRate := fs.Float64("scaling-rate", 500, "allowed aggregate rate of the scaling row, messages/s")
	paths := fs.String("paths", "sqs-lambda,sqs-worker,kafka-worker,kafka-lambda", "no-loss paths to run")
	klRates := fs.String("kafka-lambda-rates", "10,100", "allowed rates of the kafka-lambda pacing rows, messages/s")
	klParts := fs.String("kafka-lambda-partitions", "1,4", "partitions (concurrent invocations) of the kafka-lambda pacing rows")
	var co consumers.CostOptions
	fs.IntVar(&co.Emulators, "cost-emulators", 30, "lambda_cost: the unpaced concurrency (one RIE each)")
	fs.DurationVar(&co.StoreLatency, "cost-latency", 500*time.Millisecond, "lambda_cost: the HTTP destination's answer time per message")
	fs.DurationVar(&co.Warmup, "cost-warmup", 25*time.Second, "lambda_cost: warm-up before each window (longer than a lease's TTL, 15 s)")
	fs.DurationVar(&co.Window, "cost-window", 60*time.Second, "lambda_cost: measured window per row")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rates, err := ints(*rateList)
	if err != nil {
		fmt.Fprintln(stderr, "--rates:", err)
		return 2
	}
	counts, err := ints(*consList)
	if err != nil {
		fmt.Fprintln(stderr, "--consumers:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	res := result{Window: window.String(), Sink: *sinkName, Overhead: map[string]float64{}}
	fail := func(format string, a ...any) {
		msg := fmt.Sprintf(format, a...)
		log.Error(msg)
		res.Errors = append(res.Errors, msg)
	}
	parts := map[string]bool{}
	for _, p := range strings.Split(*only, ",") {
		parts[p] = true
	}

	dsn := os.Getenv("SLUICE_MYSQL_DSN")
	var newSink func() consume.Sink
	switch *sinkName {
	case "null":
		newSink = func() consume.Sink { return consumers.NullSink{} }
	case "mysql":
		if dsn == "" {
			fmt.Fprintln(stderr, "--sink=mysql needs SLUICE_MYSQL_DSN (run through `make bench-consumers`)")
			return 2
		}
		bdsn, drop, err := mysqltest.Create(ctx, dsn)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer drop()
		db, err := sql.Open("mysql", bdsn)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer db.Close()
		db.SetMaxOpenConns(32)
		newSink = func() consume.Sink { return mysqlsink.New(db) }
		pruner := mysqlsink.New(db).StartPruner(mysqlsink.PruneConfig{}) // the consumers' inbox pruner, as a host runs it
		defer pruner.Stop()
	default:
		fmt.Fprintf(stderr, "--sink=%q: want mysql or null\n", *sinkName)
		return 2
	}

	var unlimited float64
	if parts["overhead"] {
		log.Info("overhead: 2 consumers paced at +Inf and 2 unpaced, side by side, 3 rounds", "window", *window)
		ratio, p, u, err := consumers.Overhead(ctx, 2, 3, *window, newSink)
		if err != nil {
			fail("overhead: %v", err)
		} else {
			res.OverheadRatio = math.Round(ratio*1000) / 1000
			res.Overhead["paced_msgs_per_s"], res.Overhead["unpaced_msgs_per_s"] = math.Round(p), math.Round(u)
			unlimited = p + u // what the sink took from all four consumers
			log.Info("overhead", "ratio", ratio, "paced", p, "unpaced", u)
		}
	}
	if parts["pacing"] {
		for _, n := range counts {
			for _, r := range rates {
				pt, err := consumers.Pace(ctx, consumers.PacingRun{Consumers: n, Allowed: float64(r), Window: *window, Windows: *windows, Sink: newSink()})
				if err != nil {
					fail("pacing %d consumers at %d/s: %v", n, r, err)
					continue
				}
				pt.Achieved, pt.ErrorPct = math.Round(pt.Achieved*100)/100, math.Round(pt.ErrorPct*100)/100
				log.Info("pacing", "consumers", n, "allowed", r, "achieved", pt.Achieved, "error_pct", pt.ErrorPct)
				res.Pacing = append(res.Pacing, pt)
			}
		}
		if unlimited > 0 {
			// The highest rate this machine sustains: 80 % of the unlimited
			// throughput measured above, with the most consumers.
			n := counts[len(counts)-1]
			high := math.Floor(0.8*unlimited/10) * 10
			pt, err := consumers.Pace(ctx, consumers.PacingRun{Consumers: n, Allowed: high, Window: *window, Windows: *windows, Sink: newSink()})
			if err != nil {
				fail("pacing %d consumers at %v/s: %v", n, high, err)
			} else {
				pt.Achieved, pt.ErrorPct, pt.Highest = math.Round(pt.Achieved*100)/100, math.Round(pt.ErrorPct*100)/100, true
				log.Info("pacing (highest)", "consumers", n, "allowed", high, "achieved", pt.Achieved, "error_pct", pt.ErrorPct)
				res.Pacing = append(res.Pacing, pt)
			}
		}
	}
	if parts["pacing"] && !paceKafkaLambda(ctx, *klRates, *klParts, *window, *windows, &res, fail) {
		return 2
	}
	if parts["scaling"] {
		phases, err := ints(*scaleList)
		if err != nil {
			fmt.Fprintln(stderr, "--scaling:", err)
			return 2
		}
		if err := scaling(ctx, &res, phases, *scaleRate, *window, newSink(), log); err != nil {
			fail("scaling: %v", err)
		}
	}
	if parts["noloss"] || parts["cost"] {
		root, _ := os.Getwd()
		work, err := os.MkdirTemp("", "bench-consumers-")
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		defer os.RemoveAll(work)
		env := consumers.Env{
			AWSEndpoint: os.Getenv("AWS_ENDPOINT_URL"), SQSEndpoint: os.Getenv("AWS_ENDPOINT_URL_SQS"), MySQLDSN: dsn, RIE: os.Getenv("SLUICE_RIE_BIN"),
			MariaDBCtl: os.Getenv("SLUICE_MARIADB_CTL"), Root: root, WorkDir: work, Log: log,
		}
		if env.RIE == "" {
			env.RIE = filepath.Join(root, ".cache/bin/aws-lambda-rie")
		}
		if parts["noloss"] {
			noLoss(ctx, env, *paths, *messages, &res, fail, log)
		}
		if parts["cost"] {
			log.Info("lambda_cost: the SQS Lambda path unpaced, then at each point paced (mapping by the rule) and fixed", "options", fmt.Sprintf("%+v", co))
			rows, err := consumers.LambdaCost(ctx, env, co)
			if err != nil {
				fail("lambda_cost: %v", err)
			}
			for i := range rows {
				roundCost(&rows[i])
			}
			res.LambdaCost = rows
		}
	}
	b, _ := json.Marshal(res)
	fmt.Fprintln(stdout, string(b))
	if len(res.Errors) > 0 {
		return 1
	}
	return 0
}

// roundCost rounds a lambda_cost row for the JSON line.
func roundCost(r *consumers.CostRow) {
	for _, f := range []*float64{&r.Allowed, &r.Achieved, &r.ErrorPct, &r.GBsPerMillion, &r.UnpacedGBsPerMillion, &r.Ratio, &r.BatchSeconds, &r.BatchSize} {
		*f = math.Round(*f*1000) / 1000
	}
}

// noLoss runs the no-loss paths named in paths.
func noLoss(ctx context.Context, env consumers.Env, paths string, messages int, res *result, fail func(string, ...any), log *slog.Logger) {
	want := map[string]bool{}
	for _, p := range strings.Split(paths, ",") {
		want[p] = true
	}
	have := map[string]bool{}
	for _, sc := range scenarios() {
		have[sc.path] = true
		if !want[sc.path] {
			continue
		}
		log.Info("no-loss", "path", sc.path, "messages", messages)
		o := consumers.Options{Messages: messages, PoisonEvery: 100, Rate: 1000, Timeout: 30 * time.Minute}
		nl, err := sc.run(ctx, env, o)
		if err != nil {
			fail("no-loss %s: %v", sc.path, err)
			continue
		}
		log.Info("no-loss", "result", fmt.Sprintf("%+v", nl))
		res.NoLoss = append(res.NoLoss, nl)
	}
	for p := range want {
		if !have[p] {
			fail("no-loss %s: scenario not provided in this build", p)
		}
	}
}

// scaling runs the scaling row: instances come and go by phases, each
// keeping its lease in a table on the local DynamoDB endpoint (in memory
// without one), and every phase is measured over window.
func scaling(ctx context.Context, res *result, phases []int, rate float64, window time.Duration, sink consume.Sink, log *slog.Logger) error {
	run := consumers.ScalingRun{Phases: phases, Allowed: rate, Window: window, Sink: sink}
	if ep := os.Getenv("AWS_ENDPOINT_URL"); ep != "" {
		store, err := consumers.Env{AWSEndpoint: ep}.ScalingTable(ctx, fmt.Sprintf("bench-scaling-%d", time.Now().UnixNano()))
		if err != nil {
			return err
		}
		run.Store = store
	}
	log.Info("scaling: instances come and go; each shares RATE by the live leases", "phases", phases, "rate", rate, "window", window)
	pts, err := consumers.Scale(ctx, run)
	for i := range pts {
		pts[i].Achieved, pts[i].ErrorPct = math.Round(pts[i].Achieved*100)/100, math.Round(pts[i].ErrorPct*100)/100
		log.Info("scaling", "phase", pts[i].Phase, "consumers", pts[i].Consumers, "achieved", pts[i].Achieved, "error_pct", pts[i].ErrorPct)
	}
	res.Scaling = pts
	return err
}
