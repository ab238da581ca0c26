// Command worker is the long-running consumer for ECS: SQS (long polling,
// visibility extension, delete after store) or Kafka (consumer group,
// offsets committed after store), paced to its share of the loop's allowed
// rate, storing into MySQL or an HTTP service. It serves Prometheus metrics
// on /metrics. On SIGTERM it stops receiving, finishes or releases the batch
// it holds, and exits: nothing is lost. Configuration comes from the
// environment (config.go).
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-dev/sluice/functions/internal/consumerenv"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/dsnsecret"
	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

func main() {
	cfg, log := consumerenv.Configure(loadConfig)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("worker", "err", err)
		os.Exit(1)
	}
}

// source is what the worker needs from a source beyond consume.Source.
type source interface {
	consume.Source
	close(ctx context.Context) error
	depth(ctx context.Context) (int, error)
	counted
}

// counted is what a source counts for the worker's metrics.
type counted interface {
	// exhausted counts messages the source dead-lettered after too many
	// attempts.
	exhausted() int64
	// dlqRefused counts poison messages the dead-letter queue refused
	// (given back for redelivery instead).
	dlqRefused() int64
	// held is how many received messages are not yet settled (SQS: their
	// visibility is renewed; Kafka: not yet committable).
	held() int
}

type sqsSource struct{ *sqsqueue.Queue }

func (s sqsSource) close(context.Context) error            { s.Close(); return nil }
func (s sqsSource) depth(ctx context.Context) (int, error) { return s.Depth(ctx) }
func (s sqsSource) exhausted() int64                       { return 0 }
func (s sqsSource) dlqRefused() int64                      { return s.DeadLetterFailures() }
func (s sqsSource) held() int                              { return s.Held() }

type kafkaSource struct{ *kafkasource.Source }

func (s kafkaSource) close(ctx context.Context) error { return s.Close(ctx) }
func (s kafkaSource) exhausted() int64                { return s.Stats().Exhausted.Load() }
func (s kafkaSource) dlqRefused() int64               { return s.Stats().DeadLetterRefused.Load() }
func (s kafkaSource) held() int                       { return s.Held() }

// depth is the group's total lag over its topics (kafkasource.Source.Lag).
func (s kafkaSource) depth(ctx context.Context) (int, error) {
	n, err := s.Lag(ctx)
	if err != nil {
		return 0, fmt.Errorf("kafka %w", err)
	}
	return int(n), nil
}

// buildSource connects to SQS or joins the Kafka group.
func buildSource(cfg config, awsCfg aws.Config, pacer *consume.Pacer, log *slog.Logger) (source, error) {
	if cfg.Source == "kafka" {
		auth, err := cfg.KafkaAuth.Opts(awsCfg.Credentials)
		if err != nil {
			return nil, err
		}
		ks, err := kafkasource.New(kafkasource.Config{
			Brokers: cfg.KafkaBrokers, Topics: cfg.KafkaTopics, Group: cfg.KafkaGroup,
			DeadLetterTopic: cfg.KafkaDLT, Pacer: pacer, Log: log, Opts: auth,
		})
		if err != nil {
			return nil, err
		}
		return kafkaSource{Source: ks}, nil
	}
	return sqsSource{sqsqueue.New(sqs.NewFromConfig(awsCfg), sqsqueue.Config{
		QueueURL: cfg.QueueURL, DeadLetterURL: cfg.DeadLetterURL, Visibility: cfg.Visibility,
	}, log)}, nil
}

// buildSink opens the destination: MySQL (its DSN given or read from the
// secret through secrets; started, waiting for it while it is down; a
// statement that cannot work stops the worker) or HTTP (its picker
// following RATE's weights through rc). It returns a nil sink when ctx
// ends first.
func buildSink(ctx context.Context, cfg config, rc *consume.RateCacheConfig, secrets dsnsecret.API, log *slog.Logger) (consume.Sink, func(), error) {
	if cfg.Sink == "http" {
		picker, weights, err := httpsink.Balanced(cfg.HTTPEndpoints)
		if err != nil {
			return nil, nil, err
		}
		rc.Weights = weights
		hc := httpsink.Config{Timeout: cfg.HTTPTimeout, PoisonStatus: cfg.HTTPPoison}
		if cfg.Source == "kafka" {
			// The Kafka source retries a failed record after its own
			// backoff: one inline retry, so that a stuck record does not
			// hold its batch (and the other partitions) for long.
			hc.Attempts = 2
		}
		if cfg.HTTPAuthSecret != "" {
			if hc.Authorizer, err = httpsink.NewSecretAuthorizer(ctx, secrets, cfg.HTTPAuthSecret); err != nil {
				return nil, nil, fmt.Errorf("SLUICE_HTTP_AUTH_SECRET: %w", err)
			}
		}
		return httpsink.New(hc, picker, nil, consume.WallClock{}), func() {}, nil
	}
	open := cfg.DB
	open.Migrate = false // startSink migrates, retrying while MySQL is down
	db, err := consumerenv.OpenMySQL(ctx, open, cfg.MySQL.Prefix, secrets)
	if err != nil {
		return nil, nil, err
	}
	cfg.MySQL.Log = log
	for {
		s, err := startSink(ctx, db, cfg)
		if err == nil {
			pruner := s.StartPruner(mysqlsink.PruneConfig{})
			return s, func() { pruner.Stop(); db.Close() }, nil
		}
		if errors.Is(err, mysqlsink.ErrStatement) {
			db.Close()
			return nil, nil, err // a statement that cannot work: stop, do not dead-letter every message
		}
		log.Warn("start MySQL sink; retrying", "err", err)
		select {
		case <-ctx.Done():
			db.Close()
			return nil, nil, nil
		case <-time.After(2 * time.Second):
		}
	}
}

// startSink prepares the MySQL sink, after the migrations when
// SLUICE_MIGRATE=on asks for them (they need CREATE, which a runtime user
// should not hold: by default `sluice migrate` applies them).
func startSink(ctx context.Context, db *sql.DB, cfg config) (*mysqlsink.Sink, error) {
	if cfg.DB.Migrate {
		return mysqlsink.Start(ctx, db, cfg.MySQL)
	}
	return mysqlsink.Prepare(ctx, db, cfg.MySQL)
}

// Shutdown budget: on SIGTERM the batch being stored finishes (storeTimeout),
// is settled (storeTimeout again: acknowledge, dead-letter, release), and the
// source closes (closeTimeout). The task's stopTimeout must cover drain().
const (
	storeTimeout = 30 * time.Second
	closeTimeout = 10 * time.Second
)

// consumerConfig is the worker's consume.Config: no Config.Inner, so that
// the inner loop follows the settings RATE carries (the loop's PARAMS
// inner_loop).
func consumerConfig(cfg config) consume.Config {
	return consume.Config{BatchSize: cfg.BatchSize, StoreTimeout: storeTimeout}
}

// drain is the worst-case time from SIGTERM to exit.
func drain() time.Duration { return 2*storeTimeout + closeTimeout }

// run builds the worker from cfg (sink, rate, lease, source), consumes until
// ctx ends, then settles and closes within the shutdown budget.
func run(ctx context.Context, cfg config, log *slog.Logger) error {
	awsCfg, err := awsconf.Load(ctx)
	if err != nil {
		return err
	}
	rc := consume.RateCacheConfig{Loop: cfg.Loop, Period: cfg.RatePeriod, SafeRate: cfg.SafeRate}
	sink, closeSink, err := buildSink(ctx, cfg, &rc, secretsmanager.NewFromConfig(awsCfg), log)
	if err != nil || sink == nil {
		return err // nil: shut down while waiting for MySQL
	}
	defer closeSink()

	stats := &consume.Stats{}
	store := ddbstore.New(dynamodb.NewFromConfig(awsCfg), cfg.Table)
	peers := consume.LeaseOrFixed(cfg.Report, cfg.Loop, cfg.Consumers, store, stats, consume.WallClock{}, log)
	rates := consume.NewRateCache(rc, store, peers, consume.WallClock{}, log, stats)
	cons := consume.New(consumerConfig(cfg), rates, sink, consume.WallClock{}, log, stats)

	src, err := buildSource(cfg, awsCfg, cons.Pacer(), log)
	if err != nil {
		return err
	}

	mctx, mstop := context.WithCancel(context.Background())
	defer mstop()
	actual, depth := &actualRate{}, &depthGauge{}
	go actual.run(mctx, stats, 5*time.Second)
	go depth.run(mctx, src.depth, 15*time.Second)
	var srv *http.Server
	if cfg.MetricsAddr != "off" {
		reg := registry(stats, actual, depth, src, prometheus.Labels{"loop": cfg.Loop, "source": cfg.Source})
		srv = serveMetrics(cfg.MetricsAddr, reg, log)
	}

	log.Info("worker started", "source", cfg.Source, "sink", cfg.Sink, "loop", cfg.Loop, "consumers", cfg.Consumers)
	runErr := cons.Run(ctx, src)
	// Run has settled the batch it held: stored ones acknowledged, the rest
	// released. Close the source (Kafka commits what is settled).
	cctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	if err := src.close(cctx); err != nil {
		log.Warn("close source", "err", err)
	}
	if srv != nil {
		srv.Shutdown(cctx)
	}
	if l, ok := peers.(*consume.Lease); ok {
		if err := l.Close(cctx); err != nil { // the final count; the others stop counting this one
			log.Warn("close consumer lease", "err", err)
		}
	}
	log.Info("worker stopped", "consumed", stats.Consumed.Load(), "stored", stats.Stored.Load(),
		"failed", stats.Failed.Load(), "poison", stats.Poison.Load())
	return runErr
}

// serveMetrics serves reg's /metrics on addr until the server is shut down.
func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	return srv
}
