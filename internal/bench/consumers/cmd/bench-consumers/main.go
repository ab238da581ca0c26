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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/bench/kafka"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
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
	brokers, rie := os.Getenv("SLUICE_KAFKA_BROKERS"), e2ekit.RIEPath(root)
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
				Achieved: e2ekit.Round(pt.Achieved, 2), ErrorPct: e2ekit.Round(pt.ErrorPct, 2)})
		}
	}
	return true
}

// inboxRow is the inbox as the pacing rows found and left it.
type inboxRow struct {
	Prefilled     int64 `json:"prefilled"`
	AtPacingStart int64 `json:"at_pacing_start"`
	AtPacingEnd   int64 `json:"at_pacing_end"`
	PrunedPacing  int64 `json:"pruned_while_pacing"`
}

type result struct {
	Pacing        []consumers.PacingPoint  `json:"pacing"`
	Scaling       []consumers.ScalingPoint `json:"scaling,omitempty"`
	OverheadRatio float64                  `json:"overhead_ratio"`
	Overhead      map[string]float64       `json:"overhead"`
	NoLoss        []consumers.NoLoss       `json:"no_loss"`
	LambdaCost    []consumers.CostRow      `json:"lambda_cost,omitempty"`
	// Inbox is the MySQL sink's inbox around the pacing rows: its rows
	// when they start and end, and what the pruner removed meanwhile.
	Inbox  *inboxRow `json:"inbox,omitempty"`
	Window string    `json:"window"`
	Sink   string    `json:"sink"`
	Errors []string  `json:"errors,omitempty"`
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

// flags are bench-consumers' flags.
type flags struct {
	window                             *time.Duration
	windows, messages                  *int
	rateList, consList, sinkName, only *string
	scaleList, paths, klRates, klParts *string
	rate                               *float64
	prefill                            *int64
	prune                              *bool
	cost                               consumers.CostOptions
}

// parseFlags reads bench-consumers' flags from args; ok is false on a
// flag error (told on stderr).
func parseFlags(args []string, stderr io.Writer) (f flags, ok bool) {
	fs := flag.NewFlagSet("bench-consumers", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f.window = fs.Duration("window", 60*time.Second, "pacing window; the first is warm-up, then --windows are measured")
	f.windows = fs.Int("windows", 1, "measured windows per pacing point")
	f.rateList = fs.String("rates", "10,100,1000", "allowed rates, messages/s")
	f.consList = fs.String("consumers", "1,4,8", "concurrent consumer counts")
	f.sinkName = fs.String("sink", "mysql", "pacing and overhead sink: mysql (MariaDB) or null (stores nothing)")
	f.messages = fs.Int("messages", 10000, "messages per no-loss path")
	f.only = fs.String("only", "pacing,overhead,scaling,noloss,cost", "parts to run")
	f.scaleList = fs.String("scaling", "1,8,3", "instance counts of the scaling row's phases (live peers: each instance keeps a lease)")
	f.rate = fs.Float64("scaling-rate", 500, "allowed aggregate rate of the scaling row, messages/s")
	f.paths = fs.String("paths", "sqs-lambda,sqs-worker,kafka-worker,kafka-lambda", "no-loss paths to run")
	f.klRates = fs.String("kafka-lambda-rates", "10,100", "allowed rates of the kafka-lambda pacing rows, messages/s (empty: none)")
	f.klParts = fs.String("kafka-lambda-partitions", "1,4", "partitions (concurrent invocations) of the kafka-lambda pacing rows")
	f.prune = fs.Bool("prune", true, "--sink=mysql: run the consumers' inbox pruner (false: none, to attribute a pacing error)")
	f.prefill = fs.Int64("inbox-prefill", 0, "--sink=mysql: rows put in the inbox first, all past the retention (the pruner works on them while pacing runs)")
	co := &f.cost
	fs.IntVar(&co.Emulators, "cost-emulators", 30, "lambda_cost: the unpaced concurrency (one RIE each)")
	fs.DurationVar(&co.StoreLatency, "cost-latency", 500*time.Millisecond, "lambda_cost: the HTTP destination's answer time per message")
	fs.DurationVar(&co.Warmup, "cost-warmup", 25*time.Second, "lambda_cost: warm-up before each window (longer than a lease's TTL, 15 s)")
	fs.DurationVar(&co.Window, "cost-window", 60*time.Second, "lambda_cost: measured window per row")
	return f, fs.Parse(args) == nil
}

// bench is one run: its flags, log, result and the sink of the pacing and
// overhead parts.
type bench struct {
	f       flags
	ctx     context.Context
	log     *slog.Logger
	res     result
	newSink func() consume.Sink
	parts   map[string]bool
	db      *sql.DB         // the MySQL sink's database (nil: null sink)
	pruner  *mysqlsink.Sink // the sink whose pruner runs
}

// fail logs a failed measure and records it in the result's errors.
func (b *bench) fail(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	b.log.Error(msg)
	b.res.Errors = append(b.res.Errors, msg)
}

func run(args []string, stdout, stderr io.Writer) int {
	f, ok := parseFlags(args, stderr)
	if !ok {
		return 2
	}
	rates, err := ints(*f.rateList)
	if err != nil {
		fmt.Fprintln(stderr, "--rates:", err)
		return 2
	}
	counts, err := ints(*f.consList)
	if err != nil {
		fmt.Fprintln(stderr, "--consumers:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	b := &bench{f: f, ctx: ctx, log: slog.New(slog.NewTextHandler(stderr, nil)), parts: map[string]bool{},
		res: result{Window: f.window.String(), Sink: *f.sinkName, Overhead: map[string]float64{}}}
	for _, p := range strings.Split(*f.only, ",") {
		b.parts[p] = true
	}
	dsn := os.Getenv("SLUICE_MYSQL_DSN")
	closeSink, code := b.openSink(dsn, stderr)
	defer closeSink()
	if code != 0 {
		return code
	}
	if code := b.measure(rates, counts, dsn, stderr); code != 0 {
		return code
	}
	out, _ := json.Marshal(b.res)
	fmt.Fprintln(stdout, string(out))
	if len(b.res.Errors) > 0 {
		return 1
	}
	return 0
}

// openSink sets the sink of the pacing and overhead parts (--sink: mysql,
// in a database of its own on dsn's server, or null) and returns what
// closes it, with the exit code when it cannot (told on stderr).
func (b *bench) openSink(dsn string, stderr io.Writer) (closeSink func(), code int) {
	closeSink = func() {}
	switch *b.f.sinkName {
	case "null":
		b.newSink = func() consume.Sink { return consumers.NullSink{} }
		return closeSink, 0
	case "mysql":
	default:
		fmt.Fprintf(stderr, "--sink=%q: want mysql or null\n", *b.f.sinkName)
		return closeSink, 2
	}
	if dsn == "" {
		fmt.Fprintln(stderr, "--sink=mysql needs SLUICE_MYSQL_DSN (run through `make bench-consumers`)")
		return closeSink, 2
	}
	bdsn, drop, err := mysqltest.Create(b.ctx, dsn)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return closeSink, 1
	}
	db, err := sql.Open("mysql", bdsn)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return drop, 1
	}
	db.SetMaxOpenConns(32)
	if err := b.prefill(db); err != nil {
		fmt.Fprintln(stderr, err)
		db.Close()
		return drop, 1
	}
	b.db, b.pruner = db, mysqlsink.New(db)
	b.newSink = func() consume.Sink { return mysqlsink.New(db) }
	stop := func() {}
	if *b.f.prune {
		stop = b.pruner.StartPruner(mysqlsink.PruneConfig{}).Stop // the consumers' inbox pruner, as a host runs it
	}
	return func() { stop(); db.Close(); drop() }, 0
}

// prefill puts --inbox-prefill rows in the inbox, an hour past the
// retention, before anything runs.
func (b *bench) prefill(db *sql.DB) error {
	n := *b.f.prefill
	if n <= 0 {
		return nil
	}
	b.log.Info("inbox: prefilling rows past the retention", "rows", n)
	t0 := time.Now()
	err := consumers.PrefillInbox(b.ctx, db, n, time.Now().Add(-mysqlsink.DefaultRetention-time.Hour), func(r int64) { b.log.Info("inbox: prefilled", "rows", r) })
	b.res.Inbox = &inboxRow{Prefilled: n}
	b.log.Info("inbox: prefilled", "rows", n, "took", time.Since(t0).Round(time.Second))
	return err
}

// inboxNow counts the inbox's rows and returns them with what the pruner
// removed so far.
func (b *bench) inboxNow() (rows, pruned int64) {
	rows, err := consumers.InboxRows(b.ctx, b.db)
	if err != nil {
		b.fail("count the inbox: %v", err)
	}
	b.log.Info("inbox", "rows", rows)
	return rows, b.pruner.Stats().Pruned.Load()
}

// pacingInbox runs pace and, with the MySQL sink, records the inbox's
// rows when it starts and ends and what the pruner removed meanwhile.
func (b *bench) pacingInbox(pace func()) {
	if b.db == nil {
		pace()
		return
	}
	start, before := b.inboxNow()
	pace()
	end, after := b.inboxNow()
	if b.res.Inbox == nil {
		b.res.Inbox = &inboxRow{}
	}
	b.res.Inbox.AtPacingStart, b.res.Inbox.AtPacingEnd, b.res.Inbox.PrunedPacing = start, end, after-before
}

// measure runs the parts --only names, in order: overhead, pacing (and
// kafka-lambda's), scaling, no-loss and cost. It returns the exit code of
// a flag error, else 0 (the failed measures are in the result's errors).
func (b *bench) measure(rates, counts []int, dsn string, stderr io.Writer) int {
	f := b.f
	var unlimited float64
	if b.parts["overhead"] {
		unlimited = b.overhead()
	}
	if b.parts["pacing"] {
		b.pacingInbox(func() { b.pacing(rates, counts, unlimited) })
	}
	if b.parts["pacing"] && *f.klRates != "" && !paceKafkaLambda(b.ctx, *f.klRates, *f.klParts, *f.window, *f.windows, &b.res, b.fail) {
		return 2
	}
	if b.parts["scaling"] {
		phases, err := ints(*f.scaleList)
		if err != nil {
			fmt.Fprintln(stderr, "--scaling:", err)
			return 2
		}
		if err := scaling(b.ctx, &b.res, phases, *f.rate, *f.window, b.newSink(), b.log); err != nil {
			b.fail("scaling: %v", err)
		}
	}
	if b.parts["noloss"] || b.parts["cost"] {
		return b.noLossAndCost(dsn, stderr)
	}
	return 0
}

// overhead measures the overhead ratio of pacing and returns what the
// sink took from all four consumers (0 when it failed).
func (b *bench) overhead() (unlimited float64) {
	b.log.Info("overhead: 2 consumers paced at +Inf and 2 unpaced, side by side, 3 rounds", "window", *b.f.window)
	ratio, p, u, err := consumers.Overhead(b.ctx, 2, 3, *b.f.window, b.newSink)
	if err != nil {
		b.fail("overhead: %v", err)
		return 0
	}
	b.res.OverheadRatio = e2ekit.Round(ratio, 3)
	b.res.Overhead["paced_msgs_per_s"], b.res.Overhead["unpaced_msgs_per_s"] = math.Round(p), math.Round(u)
	b.log.Info("overhead", "ratio", ratio, "paced", p, "unpaced", u)
	return p + u
}

// pacing measures every count of consumers at every rate, then, when the
// unlimited throughput is known, near the highest rate the machine
// sustains.
func (b *bench) pacing(rates, counts []int, unlimited float64) {
	f := b.f
	for _, n := range counts {
		for _, r := range rates {
			pt, err := consumers.Pace(b.ctx, consumers.PacingRun{Consumers: n, Allowed: float64(r), Window: *f.window, Windows: *f.windows, Sink: b.newSink()})
			if err != nil {
				b.fail("pacing %d consumers at %d/s: %v", n, r, err)
				continue
			}
			pt.Achieved, pt.ErrorPct = e2ekit.Round(pt.Achieved, 2), e2ekit.Round(pt.ErrorPct, 2)
			b.log.Info("pacing", "consumers", n, "allowed", r, "achieved", pt.Achieved, "error_pct", pt.ErrorPct)
			b.res.Pacing = append(b.res.Pacing, pt)
		}
	}
	if unlimited <= 0 {
		return
	}
	// The highest rate this machine sustains: 80 % of the unlimited
	// throughput measured above, with the most consumers.
	n := counts[len(counts)-1]
	high := math.Floor(0.8*unlimited/10) * 10
	pt, err := consumers.Pace(b.ctx, consumers.PacingRun{Consumers: n, Allowed: high, Window: *f.window, Windows: *f.windows, Sink: b.newSink()})
	if err != nil {
		b.fail("pacing %d consumers at %v/s: %v", n, high, err)
		return
	}
	pt.Achieved, pt.ErrorPct, pt.Highest = e2ekit.Round(pt.Achieved, 2), e2ekit.Round(pt.ErrorPct, 2), true
	b.log.Info("pacing (highest)", "consumers", n, "allowed", high, "achieved", pt.Achieved, "error_pct", pt.ErrorPct)
	b.res.Pacing = append(b.res.Pacing, pt)
}

// noLossAndCost runs the no-loss paths and the lambda_cost rows, in a
// work directory of their own; it returns 1 when it cannot make one.
func (b *bench) noLossAndCost(dsn string, stderr io.Writer) int {
	root, _ := os.Getwd()
	work, err := os.MkdirTemp("", "bench-consumers-")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer os.RemoveAll(work)
	env := consumers.Env{
		AWSEndpoint: os.Getenv("AWS_ENDPOINT_URL"), SQSEndpoint: os.Getenv("AWS_ENDPOINT_URL_SQS"), MySQLDSN: dsn, RIE: e2ekit.RIEPath(root),
		MariaDBCtl: os.Getenv("SLUICE_MARIADB_CTL"), Root: root, WorkDir: work, Log: b.log,
	}
	if b.parts["noloss"] {
		noLoss(b.ctx, env, *b.f.paths, *b.f.messages, &b.res, b.fail, b.log)
	}
	if b.parts["cost"] {
		b.log.Info("lambda_cost: the SQS Lambda path unpaced, then at each point paced (mapping by the rule) and fixed", "options", fmt.Sprintf("%+v", b.f.cost))
		rows, err := consumers.LambdaCost(b.ctx, env, b.f.cost)
		if err != nil {
			b.fail("lambda_cost: %v", err)
		}
		for i := range rows {
			roundCost(&rows[i])
		}
		b.res.LambdaCost = rows
	}
	return 0
}

// roundCost rounds a lambda_cost row for the JSON line.
func roundCost(r *consumers.CostRow) {
	for _, f := range []*float64{&r.Allowed, &r.Achieved, &r.ErrorPct, &r.GBsPerMillion, &r.UnpacedGBsPerMillion, &r.Ratio, &r.BatchSeconds, &r.BatchSize} {
		*f = e2ekit.Round(*f, 3)
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
		pts[i].Achieved, pts[i].ErrorPct = e2ekit.Round(pts[i].Achieved, 2), e2ekit.Round(pts[i].ErrorPct, 2)
		log.Info("scaling", "phase", pts[i].Phase, "consumers", pts[i].Consumers, "achieved", pts[i].Achieved, "error_pct", pts[i].ErrorPct)
	}
	res.Scaling = pts
	return err
}
