package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/internal/dbload"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/lambdaesm"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// localCommands are the local stand-ins for the AWS plumbing (internal/localaws,
// internal/cpupub, internal/dbload), each a long-running process stopped by SIGINT or
// SIGTERM.
func localCommands() []command {
	return []command{
		{name: "controller", summary: "run the controller bootstrap under the RIE on a schedule against a table (--table T)", run: runLocalController},
		{name: "scheduler", summary: "invoke the controller bootstrap under the RIE every tick (EventBridge schedule)", run: runLocalScheduler},
		{name: "esm", summary: "poll SQS and invoke the consumer bootstrap under the RIE (SQS event source mapping)", run: runLocalESM},
		{name: "kafka-esm", summary: "read Kafka with a consumer group and invoke the consumer bootstrap under the RIE (MSK / self-managed Kafka event source mapping)", run: runLocalKafkaESM},
		{name: "cpu-publisher", summary: "publish MariaDB's CPU from /proc as AWS/RDS CPUUtilization", run: runLocalCPUPublisher},
		{name: "load", summary: "external load on MariaDB (the disturbance), or install the per-message workload", run: runLocalLoad},
	}
}

// signalContext is a context that SIGINT or SIGTERM cancels.
func signalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// runStandIn parses a stand-in's flags (required: those it cannot do
// without) and, unless that decides the exit status, returns what body
// returns, run under a context that SIGINT or SIGTERM cancels.
func runStandIn(fs *flag.FlagSet, args []string, stdout, stderr io.Writer, required []string, body func(ctx context.Context) int) int {
	if code, done := flagsOrExit(fs, args, stdout, stderr, required...); done {
		return code
	}
	ctx, stop := signalContext()
	defer stop()
	return body(ctx)
}

// runSchedule invokes s's function once now (once; exit 1 on a function
// error) or on s's schedule until ctx ends. A scheduler that cannot run
// fails command name with code.
func runSchedule(ctx context.Context, s *localaws.Scheduler, once bool, stderr io.Writer, name string, code int) int {
	if once {
		if inv := s.Fire(ctx); inv.Err != nil {
			return 1
		}
		return 0
	}
	return failIf(stderr, name, s.Run(ctx), code)
}

func runLocalScheduler(args []string, stdout, stderr io.Writer) int {
	const name = "sluice local scheduler"
	fs := newFlagSet(name, name+" --rie URL [--period 10s]",
		"Invoke the function served by a Lambda Runtime Interface Emulator every --period, on\n"+
			"multiples of the period, with an EventBridge scheduled-event payload (as the controller's\n"+
			"schedule rule does). One JSON log line per invocation on stdout.")
	rie := fs.String("rie", "http://127.0.0.1:9000", "emulator URL (base or full invocation URL)")
	period := fs.Duration("period", time.Minute, "schedule period")
	rule := fs.String("rule", localaws.DefaultRule, "schedule rule name in the event's resources")
	once := fs.Bool("once", false, "invoke once now and exit (exit 1 on a function error)")
	return runStandIn(fs, args, stdout, stderr, nil, func(ctx context.Context) int {
		s := &localaws.Scheduler{Invoker: &localaws.RIE{URL: *rie}, Period: *period, Rule: *rule, Clock: consume.WallClock{},
			Log: slog.New(slog.NewJSONHandler(stdout, nil))}
		return runSchedule(ctx, s, *once, stderr, name, 2)
	})
}

func runLocalESM(args []string, stdout, stderr io.Writer) int {
	const name = "sluice local esm"
	fs := newFlagSet(name, name+" --queue-url URL --rie URL[,URL...] [--batch 10] [--mapping UUID] [--function NAME] [--memory 256]",
		"Poll an SQS queue and invoke the consumer function under the emulator with real SQS batch\n"+
			"events, one poller per emulator (an emulator runs one invocation at a time). With --mapping,\n"+
			"at most the mapping's ScalingConfig.MaximumConcurrency pollers run at once, read from the\n"+
			"local endpoint's Lambda API every --every (create the mapping there with\n"+
			"`aws lambda create-event-source-mapping --scaling-config MaximumConcurrency=N`); a poller\n"+
			"stopped by a scale-down finishes its batch first. Without it, every emulator polls.\n"+
			"Messages the function does not report in batchItemFailures are deleted; failures return\n"+
			"after their visibility timeout and the queue's redrive policy moves them to its dead-letter\n"+
			"queue. One JSON line per invocation gives its billed duration (the invocation timed by the\n"+
			"poller, rounded up to 1 ms); a summary with GB-seconds (billed s x --memory / 1024) ends the\n"+
			"run. With --function, the batches' figures are put to CloudWatch as AWS publishes them\n"+
			"(AWS/Lambda Duration and Invocations of the function, AWS/SQS NumberOfMessagesDeleted of the\n"+
			"queue), every 5 s. Uses AWS_ENDPOINT_URL_SQS for SQS, AWS_ENDPOINT_URL for Lambda and\n"+
			"CloudWatch.")
	queue := fs.String("queue-url", "", "queue URL")
	ries := fs.String("rie", "http://127.0.0.1:9000", "comma-separated emulator URLs")
	batch := fs.Int("batch", 10, "batch size, 1 to 10")
	wait := fs.Duration("wait", time.Second, "long-poll wait")
	mapping := fs.String("mapping", "", "UUID of the event source mapping whose MaximumConcurrency limits the pollers")
	every := fs.Duration("every", localaws.DefaultConcurrencyEvery, "how often the mapping is read")
	memory := fs.Int("memory", 256, "the function's memory in MB (for GB-seconds)")
	function := fs.String("function", "", "the function's name: put its and the queue's CloudWatch figures as AWS does")
	return runStandIn(fs, args, stdout, stderr, []string{"queue-url"}, func(ctx context.Context) int {
		cfg, err := awsconf.Load(ctx)
		if err != nil {
			return fail(stderr, name, err, 1)
		}
		api := sqs.NewFromConfig(cfg)
		arn, err := localaws.LookupQueueARN(ctx, api, *queue)
		if err != nil {
			return fail(stderr, name, err, 1)
		}
		log := slog.New(slog.NewJSONHandler(stdout, nil))
		f := &localaws.Fleet{Every: *every, MemoryMB: *memory, Log: log}
		if *mapping != "" {
			f.Concurrency = localaws.MappingConcurrency(lambdaesm.New(lambda.NewFromConfig(cfg)), *mapping)
			f.Enabled = localaws.MappingEnabled(lambda.NewFromConfig(cfg), *mapping)
		}
		var onBatch func(localaws.BatchResult)
		if *function != "" {
			fig := &localaws.Figures{API: cwmetric.NewClient(cfg, os.Getenv("AWS_ENDPOINT_URL")), Function: *function, Queue: localaws.QueueName(*queue), Log: log}
			onBatch = fig.Record
			go fig.Run(ctx)
		}
		for _, u := range strings.Split(*ries, ",") {
			f.Pollers = append(f.Pollers, &localaws.Poller{API: api, Invoker: &localaws.RIE{URL: u}, QueueURL: *queue, QueueARN: arn,
				Region: cfg.Region, BatchSize: *batch, Wait: *wait, Log: log, OnBatch: onBatch})
		}
		f.Run(ctx)
		return 0
	})
}

func runLocalKafkaESM(args []string, stdout, stderr io.Writer) int {
	const name = "sluice local kafka-esm"
	fs := newFlagSet(name, name+" --topics T[,T...] [--brokers 127.0.0.1:9092] [--group G] --rie URL[,URL...] [--batch 100]",
		"Read Kafka topics as a consumer group and invoke the Kafka consumer function under the\n"+
			"emulator with real Kafka events (base64 keys and values, headers as byte lists), one group\n"+
			"member per emulator: the partitions are shared among them, as Lambda's pollers share them.\n"+
			"A batch's offsets are committed only after its invocation succeeded; a failed invocation is\n"+
			"retried with the same batch after --retry-wait while its partitions wait (no partial batch\n"+
			"response). With --max-retries N the batch is discarded and committed after N retries, as it\n"+
			"would go to the mapping's on-failure destination. With --mapping, nothing is polled while\n"+
			"that mapping on the local endpoint is disabled (a paused loop's, read every --every).")
	brokers := fs.String("brokers", envOr("SLUICE_KAFKA_BROKERS", "127.0.0.1:9092"), "comma-separated seed brokers")
	topics := fs.String("topics", "", "comma-separated topics")
	group := fs.String("group", "sluice-kafka-esm", "consumer group (the mapping's ConsumerGroupId)")
	ries := fs.String("rie", "http://127.0.0.1:9000", "comma-separated emulator URLs")
	batch := fs.Int("batch", 100, "batch size (BatchSize)")
	window := fs.Duration("window", 500*time.Millisecond, "batching window (MaximumBatchingWindowInSeconds)")
	retryWait := fs.Duration("retry-wait", time.Second, "pause before a failed batch is invoked again")
	maxRetries := fs.Int("max-retries", 0, "retries before a failed batch is discarded (0: until it succeeds)")
	selfManaged := fs.Bool("self-managed", false, "eventSource SelfManagedKafka instead of aws:kafka")
	mapping := fs.String("mapping", "", "UUID of the event source mapping on the local endpoint: nothing is polled while it is disabled")
	every := fs.Duration("every", localaws.DefaultConcurrencyEvery, "how often the mapping is read")
	return runStandIn(fs, args, stdout, stderr, []string{"topics"}, func(ctx context.Context) int {
		log := slog.New(slog.NewJSONHandler(stdout, nil))
		var enabled func(context.Context) (bool, error)
		if *mapping != "" {
			cfg, err := awsconf.Load(ctx)
			if err != nil {
				return fail(stderr, name, err, 1)
			}
			enabled = localaws.MappingEnabled(lambda.NewFromConfig(cfg), *mapping)
		}
		source := "aws:kafka"
		if *selfManaged {
			source = "SelfManagedKafka"
		}
		urls := strings.Split(*ries, ",")
		done := make(chan struct{}, len(urls))
		for _, u := range urls {
			cl, err := localaws.NewKafkaClient(strings.Split(*brokers, ","), *group, strings.Split(*topics, ","))
			if err != nil {
				return fail(stderr, name, err, 1)
			}
			defer cl.Close()
			p := &localaws.KafkaPoller{Client: cl, Invoker: &localaws.RIE{URL: u}, BatchSize: *batch, Window: *window,
				RetryWait: *retryWait, MaxRetries: *maxRetries, EventSource: source, BootstrapServers: *brokers, Log: log,
				Enabled: enabled, Every: *every}
			go func() { p.Run(ctx); done <- struct{}{} }()
		}
		for range urls {
			<-done
		}
		return 0
	})
}

func runLocalCPUPublisher(args []string, stdout, stderr io.Writer) int {
	const name = "sluice local cpu-publisher"
	fs := newFlagSet(name, name+" [--instance ID] [--period 60s] [--process mariadbd | --pid N] [--cores N]",
		"Measure the database server process's CPU from /proc/<pid>/stat (utime + stime over wall\n"+
			"time) and publish it as AWS/RDS CPUUtilization with DBInstanceIdentifier, once per period,\n"+
			"as RDS does. 100 % is every core the process may use: the smaller of its CPU affinity and\n"+
			"its cgroup quota, or --cores. Uses AWS_ENDPOINT_URL.")
	instance := fs.String("instance", "sluice-db", "DBInstanceIdentifier")
	period := fs.Duration("period", time.Minute, "metric period (whole seconds)")
	delay := fs.Duration("delay", 0, "publish each datapoint this long after its period ends")
	process := fs.String("process", "mariadbd", "command name of the process")
	pid := fs.Int("pid", 0, "pid of the process (default: find --process)")
	cores := fs.Float64("cores", 0, "cores that 100 % means (default: affinity and cgroup quota)")
	return runStandIn(fs, args, stdout, stderr, nil, func(ctx context.Context) int {
		var find func() (int, error)
		if *pid == 0 {
			find = cpupub.Named(*process)
		}
		sampler, err := cpupub.NewSampler(*pid, find, *cores)
		if err != nil {
			return fail(stderr, name, err, 1)
		}
		cfg, err := awsconf.Load(ctx)
		if err != nil {
			return fail(stderr, name, err, 1)
		}
		log := slog.New(slog.NewJSONHandler(stdout, nil))
		log.Info("cpu publisher", "pid", sampler.PID, "cores", sampler.Cores, "clock_ticks", sampler.Hz, "instance", *instance, "period", period.String())
		p := &cpupub.Publisher{CPU: sampler, API: cwmetric.NewClient(cfg, awsconf.Endpoint()), Instance: *instance,
			Period: *period, Delay: *delay, Clock: consume.WallClock{}, Log: log}
		return failIf(stderr, name, p.Run(ctx), 2)
	})
}

func runLocalLoad(args []string, stdout, stderr io.Writer) int {
	const name = "sluice local load"
	fs := newFlagSet(name, name+" [--qps 20] [--for 2m] | --install",
		"Add CPU load to MariaDB from outside the loop: the workload's aggregate over --scan-rows\n"+
			"rows, --qps times a second, for --for (0: until SIGINT). With --install, install the\n"+
			"per-message workload (internal/dbload: tables and the trigger on the messages table) in the\n"+
			"DSN's database and exit.")
	dsn := fs.String("dsn", os.Getenv("SLUICE_MYSQL_DSN"), "MariaDB DSN (default $SLUICE_MYSQL_DSN)")
	qps := fs.Float64("qps", 20, "queries per second")
	scan := fs.Int("scan-rows", dbload.DefaultScanRows, "rows each query (and, with --install, each message) reads")
	data := fs.Int("data-rows", dbload.DefaultDataRows, "rows of the workload's data table")
	workers := fs.Int("workers", 2, "connections")
	dur := fs.Duration("for", 0, "how long (0: until interrupted)")
	install := fs.Bool("install", false, "install the per-message workload and exit")
	return runStandIn(fs, args, stdout, stderr, nil, func(ctx context.Context) int {
		if *dsn == "" {
			fmt.Fprintf(stderr, "%s: set --dsn or SLUICE_MYSQL_DSN\n", name)
			return 2
		}
		db, err := sql.Open("mysql", *dsn)
		if err != nil {
			return fail(stderr, name, err, 2)
		}
		defer db.Close()
		if *install {
			if err := dbload.Install(ctx, db, dbload.Workload{DataRows: *data, ScanRows: *scan}); err != nil {
				return fail(stderr, name, err, 1)
			}
			fmt.Fprintf(stdout, "workload installed: %d data rows, %d rows per message\n", *data, *scan)
			return 0
		}
		g := &dbload.LoadGenerator{DB: db, Rate: *qps, ScanRows: *scan, DataRows: *data, Workers: *workers}
		if err := g.Start(ctx); err != nil {
			return fail(stderr, name, err, 2)
		}
		if *dur > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *dur)
			defer cancel()
		}
		<-ctx.Done()
		g.Stop()
		done, failed := g.Queries()
		fmt.Fprintf(stdout, "load: %d queries, %d failed\n", done, failed)
		if failed > 0 {
			return 1
		}
		return 0
	})
}
