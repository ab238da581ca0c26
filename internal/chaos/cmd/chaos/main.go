// Command chaos runs the consumers' fault scenarios (internal/chaos) on the
// real SQS paths and prints one JSON line last: {"scenarios": [...]}, one
// object per scenario and path. `make chaos` starts the services it needs
// and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/chaos"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
)

func main() {
	only := flag.String("only", "", "comma-separated scenario names to run (default: all)")
	paths := flag.String("paths", "", "comma-separated paths to run: sqs-lambda, sqs-worker, kafka-worker, kafka-lambda (default: all)")
	lambdaMsgs := flag.Int("lambda-messages", chaos.Full.Lambda, "messages per run on the Lambda path")
	workerMsgs := flag.Int("worker-messages", chaos.Full.Worker, "messages per run on the worker path")
	scale := flag.Float64("scale", chaos.Full.Scale, "multiplies the scenarios' durations (1: the issue's)")
	baseline := flag.Bool("baseline", false, "play mysql-down-15m as before the probes through the function (receiving probes, the retry backoff with an open circuit)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(*only, *paths, chaos.Size{Lambda: *lambdaMsgs, Worker: *workerMsgs, Scale: *scale, Baseline: *baseline}, log); err != nil {
		log.Error("chaos", "err", err)
		os.Exit(1)
	}
}

func run(only, paths string, size chaos.Size, log *slog.Logger) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "sluice-chaos-")
	if err != nil {
		return err
	}
	rie := e2ekit.RIEPath(root)
	e := consumers.Env{AWSEndpoint: os.Getenv("AWS_ENDPOINT_URL"), SQSEndpoint: os.Getenv("AWS_ENDPOINT_URL_SQS"), RIE: rie, Root: root, WorkDir: work, Log: log}
	if e.AWSEndpoint == "" {
		return fmt.Errorf("AWS_ENDPOINT_URL is not set: run through `make chaos` or eval \"$(bash localstack/stack/env.sh)\"")
	}
	results, err := runSQS(ctx, e, only, paths, size, log)
	if err != nil {
		return err
	}
	if brokers := os.Getenv("SLUICE_KAFKA_BROKERS"); brokers != "" {
		kr, err := runKafka(ctx, e, strings.Split(brokers, ","), only, paths, size, log)
		if err != nil {
			return err
		}
		results = append(results, kr...)
	}
	log.Info("logs", "dir", work)
	fmt.Println(chaos.JSON(results))
	for _, r := range results {
		if !r.OK {
			return fmt.Errorf("scenario %s on %s failed", r.Name, r.Path)
		}
	}
	return nil
}

// runSQS plays the SQS scenarios (Lambda and worker paths).
func runSQS(ctx context.Context, e consumers.Env, only, paths string, size chaos.Size, log *slog.Logger) ([]chaos.Result, error) {
	var results []chaos.Result
	var bins map[string]string
	for _, sc := range chaos.Scenarios(size) {
		if (only != "" && !contains(only, sc.Name)) || (paths != "" && !contains(paths, sc.Path)) {
			continue
		}
		if bins == nil {
			var err error
			if bins, err = chaos.Build(ctx, e); err != nil {
				return nil, err
			}
		}
		log.Info("scenario", "name", sc.Name, "path", sc.Path, "messages", sc.Messages)
		r := chaos.Play(ctx, e, bins, sc)
		log.Info("result", "name", r.Name, "path", r.Path, "ok", r.OK, "stored", r.Stored, "missing", r.Missing,
			"healthy_dead_lettered", r.HealthyDeadLettered, "deadline_hits", r.LambdaDeadlineHits, "seconds", r.Seconds, "err", r.Error)
		results = append(results, r)
	}
	return results, nil
}

// runKafka plays the Kafka scenarios on the kafka-worker and kafka-lambda
// paths that paths selects.
func runKafka(ctx context.Context, e consumers.Env, brokers []string, only, paths string, size chaos.Size, log *slog.Logger) ([]chaos.Result, error) {
	var scs []chaos.KafkaScenario
	if paths == "" || contains(paths, chaos.PathKafka) {
		scs = append(scs, chaos.KafkaScenarios(size)...)
	}
	if paths == "" || contains(paths, chaos.PathKafkaLambda) {
		lambda, err := kafkaLambda(ctx, e)
		if err != nil {
			return nil, err
		}
		scs = append(scs, chaos.KafkaLambdaScenarios(size, lambda)...)
	}
	var results []chaos.Result
	for _, sc := range scs {
		if only != "" && !contains(only, sc.Name) {
			continue
		}
		path := chaos.PathKafka
		if sc.Lambda != nil {
			path = chaos.PathKafkaLambda
		}
		log.Info("scenario", "name", sc.Name, "path", path, "messages", sc.Messages)
		results = append(results, chaos.PlayKafka(ctx, e.Root, brokers, sc))
	}
	return results, nil
}

// kafkaLambda builds the Kafka consumer's bootstrap for the kafka-lambda
// path; the function's output goes to a log in the work directory.
func kafkaLambda(ctx context.Context, e consumers.Env) (*chaos.KafkaLambda, error) {
	bin, err := e.Build(ctx, "./functions/kafka-consumer", "kafka-bootstrap")
	if err != nil {
		return nil, err
	}
	logf, err := os.Create(filepath.Join(e.WorkDir, "kafka-lambda.log"))
	if err != nil {
		return nil, err
	}
	return &chaos.KafkaLambda{Bootstrap: bin, RIE: e.RIE, Log: logf}, nil
}

func contains(list, name string) bool {
	for _, x := range strings.Split(list, ",") {
		if strings.TrimSpace(x) == name {
			return true
		}
	}
	return false
}
