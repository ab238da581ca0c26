// Package consumerenv is what the consumer Lambdas (functions/sqs-consumer,
// functions/kafka-consumer) share: the configuration of the loop, its RATE
// and the destination, read once from the environment, and the consumer
// wired from it (DynamoDB RATE reader, rate cache, MySQL or HTTP sink).
// Each function adds only what its event source needs.
package consumerenv

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/sluice-dev/sluice/functions/internal/envconf"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/dsnsecret"
	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// Config is a consumer Lambda's loop, rate and sink configuration.
type Config struct {
	Loop           string        // SLUICE_LOOP: the loop whose RATE is read
	Table          string        // SLUICE_TABLE: the DynamoDB table
	SafeRate       float64       // SLUICE_SAFE_RATE: aggregate msg/s when RATE is missing or stale
	RatePeriod     time.Duration // SLUICE_RATE_PERIOD: bound on the cached rate's age
	Report         bool          // SLUICE_REPORT: on (default) keeps a lease and reports what was stored; off shares by SLUICE_CONSUMERS
	Consumers      int           // SLUICE_CONSUMERS: peers sharing the rate (the mapping's concurrency)
	Sink           string        // SLUICE_SINK: mysql or http
	DB             DB            // SLUICE_MYSQL_DSN or SLUICE_MYSQL_SECRET, SLUICE_MIGRATE (on by default)
	HTTPPoison     []int         // SLUICE_HTTP_POISON_STATUS: statuses that make a message poison (default 400,413,415,422)
	HTTPEndpoints  []string      // SLUICE_HTTP_ENDPOINTS: comma-separated URLs
	HTTPAuthSecret string        // SLUICE_HTTP_AUTH_SECRET: a Secrets Manager secret (name or ARN) holding the Authorization header
	HTTPProbePath  string        // SLUICE_HTTP_PROBE_PATH: what a probe of the destination GETs, relative to the endpoint (default: the endpoint)

	// MySQL is the MySQL sink's statement, table prefix and inbox retention
	// (SLUICE_MYSQL_STATEMENT or SLUICE_MYSQL_STATEMENT_FILE,
	// SLUICE_MYSQL_PREFIX, SLUICE_MYSQL_INBOX_RETENTION).
	MySQL mysqlsink.Config
}

// Load reads the configuration from getenv (os.Getenv in a function),
// with its defaults: loop "default", the default table, a safe rate of
// 10 msg/s, one consumer, the MySQL sink.
func Load(getenv func(string) string) (Config, error) {
	r := envconf.New(getenv)
	c := Config{
		Loop: r.String("SLUICE_LOOP", "default"), Table: r.String("SLUICE_TABLE", ddbstore.DefaultTable),
		Sink:           r.String("SLUICE_SINK", "mysql"),
		SafeRate:       r.Rate("SLUICE_SAFE_RATE", 10),
		RatePeriod:     r.Duration("SLUICE_RATE_PERIOD", consume.DefaultRatePeriod, "1s"),
		Consumers:      r.Count("SLUICE_CONSUMERS", 1),
		HTTPAuthSecret: getenv("SLUICE_HTTP_AUTH_SECRET"),
		HTTPProbePath:  getenv("SLUICE_HTTP_PROBE_PATH"),
	}
	c.Report = envconf.Parse(r, "SLUICE_REPORT", consume.ParseReport)
	c.HTTPEndpoints = envconf.Parse(r, "SLUICE_HTTP_ENDPOINTS", optional("SLUICE_HTTP_ENDPOINTS", httpsink.ParseEndpoints))
	c.HTTPPoison = envconf.Parse(r, "SLUICE_HTTP_POISON_STATUS", optional("SLUICE_HTTP_POISON_STATUS", httpsink.ParseStatuses))
	if err := r.Err(); err != nil {
		return c, err
	}
	var err error
	switch c.Sink {
	case "mysql":
		if c.DB, err = LoadDB(getenv, true, mysqlsink.LambdaConn()); err != nil {
			return c, err
		}
		if c.MySQL, err = mysqlsink.ConfigFromEnv(getenv); err != nil {
			return c, err
		}
		c.MySQL.Loop = c.Loop
	case "http":
		if len(c.HTTPEndpoints) == 0 {
			return c, fmt.Errorf("SLUICE_SINK=http needs SLUICE_HTTP_ENDPOINTS")
		}
	default:
		return c, fmt.Errorf("SLUICE_SINK=%q: want mysql or http", c.Sink)
	}
	return c, nil
}

// optional parses a non-empty value with parse, naming the variable in its
// error; an empty one is the zero value.
func optional[T any](name string, parse func(string) (T, error)) func(string) (T, error) {
	return func(v string) (T, error) {
		var zero T
		if v == "" {
			return zero, nil
		}
		x, err := parse(v)
		if err != nil {
			return zero, fmt.Errorf("%s: %w", name, err)
		}
		return x, nil
	}
}

// Consumer loads the AWS configuration (awsconf), which it returns for the
// function's own clients, and wires the consumer: the sink, the DynamoDB
// RATE reader, the lease that shares the rate among live peers (or
// SLUICE_CONSUMERS with SLUICE_REPORT=off) and the rate cache. close
// releases the sink (the MySQL pool).
func Consumer(ctx context.Context, c Config, log *slog.Logger) (awsCfg aws.Config, cons *consume.Consumer, close func(), err error) {
	awsCfg, err = awsconf.Load(ctx)
	if err != nil {
		return awsCfg, nil, nil, err
	}
	rc := consume.RateCacheConfig{Loop: c.Loop, Period: c.RatePeriod, SafeRate: c.SafeRate}
	sink, closer, err := Sink(ctx, c, &rc, secretsmanager.NewFromConfig(awsCfg), log)
	if err != nil {
		return awsCfg, nil, nil, err
	}
	stats := &consume.Stats{}
	store := ddbstore.New(dynamodb.NewFromConfig(awsCfg), c.Table)
	peers := consume.LeaseOrFixed(c.Report, c.Loop, c.Consumers, store, stats, consume.WallClock{}, log)
	rates := consume.NewRateCache(rc, store, peers, consume.WallClock{}, log, stats)
	return awsCfg, consume.New(ConsumerConfig(), rates, sink, consume.WallClock{}, log, stats), closer, nil
}

// ConsumerConfig is the Lambda consumers' consume.Config: batches of 10,
// and no Config.Inner, so that the inner loop follows the settings RATE
// carries (the loop's PARAMS inner_loop).
func ConsumerConfig() consume.Config { return consume.Config{BatchSize: 10} }

// Sink opens the destination: MySQL (OpenMySQL, secrets reading its DSN;
// the statement prepared, so that one that cannot work stops the function
// at start) or HTTP (its picker following RATE's weights, which it sets in
// rc).
func Sink(ctx context.Context, c Config, rc *consume.RateCacheConfig, secrets dsnsecret.API, log *slog.Logger) (consume.Sink, func(), error) {
	if c.Sink == "http" {
		picker, weights, err := httpsink.Balanced(c.HTTPEndpoints)
		if err != nil {
			return nil, nil, err
		}
		rc.Weights = weights
		hc := httpsink.Config{PoisonStatus: c.HTTPPoison, ProbePath: c.HTTPProbePath}
		if c.HTTPAuthSecret != "" {
			if hc.Authorizer, err = httpsink.NewSecretAuthorizer(ctx, secrets, c.HTTPAuthSecret); err != nil {
				return nil, nil, fmt.Errorf("SLUICE_HTTP_AUTH_SECRET: %w", err)
			}
		}
		return httpsink.New(hc, picker, nil, consume.WallClock{}), func() {}, nil
	}
	db, err := OpenMySQL(ctx, c.DB, c.MySQL.Prefix, secrets)
	if err != nil {
		return nil, nil, err
	}
	c.MySQL.Log = log
	s, err := mysqlsink.Prepare(ctx, db, c.MySQL)
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	// The inbox's pruner runs in a goroutine, frozen with the environment
	// between invocations: each round is bounded by its own budget.
	pruner := s.StartPruner(mysqlsink.PruneConfig{})
	return s, func() { pruner.Stop(); db.Close() }, nil
}
