package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/dsnsecret"
	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// config is the function's configuration, read once from the environment.
type config struct {
	Loop          string        // SLUICE_LOOP: the loop whose RATE is read
	Table         string        // SLUICE_TABLE: the DynamoDB table
	SafeRate      float64       // SLUICE_SAFE_RATE: aggregate msg/s when RATE is missing or stale
	RatePeriod    time.Duration // SLUICE_RATE_PERIOD: bound on the cached rate's age
	Report        bool          // SLUICE_REPORT: on (default) keeps a lease and reports what was stored; off shares by SLUICE_CONSUMERS
	Consumers     int           // SLUICE_CONSUMERS: peers sharing the rate (the mapping's MaximumConcurrency)
	Sink          string        // SLUICE_SINK: mysql or http
	MySQLDSN      string        // SLUICE_MYSQL_DSN (local runs; deployments use SLUICE_MYSQL_SECRET)
	MySQLSecret   string        // SLUICE_MYSQL_SECRET: Secrets Manager secret (ARN or name) holding the DSN
	Migrate       bool          // SLUICE_MIGRATE: "off" when migrations are their own deploy step
	HTTPPoison    []int         // SLUICE_HTTP_POISON_STATUS: statuses that make a message poison (default 400,413,415,422)
	HTTPEndpoints []string      // SLUICE_HTTP_ENDPOINTS: comma-separated URLs
	DeadLetterURL string        // SLUICE_DLQ_URL: where poison messages go with their reason
	QueueURL      string        // SLUICE_QUEUE_URL: the mapping's queue, to set the visibility of messages handed back

	// MySQL is the MySQL sink's statement, table prefix and inbox retention
	// (SLUICE_MYSQL_STATEMENT or SLUICE_MYSQL_STATEMENT_FILE,
	// SLUICE_MYSQL_PREFIX, SLUICE_MYSQL_INBOX_RETENTION).
	MySQL mysqlsink.Config
}

func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		Loop:          getenv("SLUICE_LOOP"),
		Table:         getenv("SLUICE_TABLE"),
		Sink:          getenv("SLUICE_SINK"),
		MySQLDSN:      getenv("SLUICE_MYSQL_DSN"),
		MySQLSecret:   getenv("SLUICE_MYSQL_SECRET"),
		Migrate:       getenv("SLUICE_MIGRATE") != "off",
		DeadLetterURL: getenv("SLUICE_DLQ_URL"),
		QueueURL:      getenv("SLUICE_QUEUE_URL"),
		SafeRate:      10,
		RatePeriod:    consume.DefaultRatePeriod,
		Consumers:     1,
	}
	if c.Loop == "" {
		c.Loop = "default"
	}
	if c.Table == "" {
		c.Table = ddbstore.DefaultTable
	}
	if c.Sink == "" {
		c.Sink = "mysql"
	}
	if err := c.readHTTP(getenv); err != nil {
		return c, err
	}
	var err error
	if c.Report, err = consume.ParseReport(getenv("SLUICE_REPORT")); err != nil {
		return c, err
	}
	if v := getenv("SLUICE_SAFE_RATE"); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f < 0 {
			return c, fmt.Errorf("SLUICE_SAFE_RATE=%q: want a rate >= 0 in messages/s", v)
		}
		c.SafeRate = f
	}
	if v := getenv("SLUICE_RATE_PERIOD"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return c, fmt.Errorf("SLUICE_RATE_PERIOD=%q: want a positive duration such as 1s", v)
		}
		c.RatePeriod = d
	}
	if v := getenv("SLUICE_CONSUMERS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("SLUICE_CONSUMERS=%q: want a count >= 1", v)
		}
		c.Consumers = n
	}
	switch c.Sink {
	case "mysql":
		if c.MySQLDSN == "" && c.MySQLSecret == "" {
			return c, fmt.Errorf("SLUICE_SINK=mysql needs SLUICE_MYSQL_SECRET (a Secrets Manager secret holding the DSN) or SLUICE_MYSQL_DSN")
		}
		m, err := mysqlsink.ConfigFromEnv(getenv)
		if err != nil {
			return c, err
		}
		m.Loop = c.Loop
		c.MySQL = m
	case "http":
		if len(c.HTTPEndpoints) == 0 {
			return c, fmt.Errorf("SLUICE_SINK=http needs SLUICE_HTTP_ENDPOINTS")
		}
	default:
		return c, fmt.Errorf("SLUICE_SINK=%q: want mysql or http", c.Sink)
	}
	return c, nil
}

// readHTTP reads the HTTP sink's endpoints and poison statuses.
func (c *config) readHTTP(getenv func(string) string) error {
	if e := getenv("SLUICE_HTTP_ENDPOINTS"); e != "" {
		eps, err := httpsink.ParseEndpoints(e)
		if err != nil {
			return fmt.Errorf("SLUICE_HTTP_ENDPOINTS: %w", err)
		}
		c.HTTPEndpoints = eps
	}
	if v := getenv("SLUICE_HTTP_POISON_STATUS"); v != "" {
		st, err := httpsink.ParseStatuses(v)
		if err != nil {
			return fmt.Errorf("SLUICE_HTTP_POISON_STATUS: %w", err)
		}
		c.HTTPPoison = st
	}
	return nil
}

// build wires the handler: DynamoDB RATE reader, cache, sink, consumer.
func build(ctx context.Context, c config, log *slog.Logger) (*sqsqueue.Handler, func(), error) {
	aws, err := awsconf.Load(ctx)
	if err != nil {
		return nil, nil, err
	}
	var sink consume.Sink
	closer := func() {}
	switch c.Sink {
	case "mysql":
		db, err := openMySQL(ctx, c, secretsmanager.NewFromConfig(aws))
		if err != nil {
			return nil, nil, err
		}
		c.MySQL.Log = log
		s, err := mysqlsink.Prepare(ctx, db, c.MySQL)
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		sink, closer = s, func() { db.Close() }
	}
	rc := consume.RateCacheConfig{Loop: c.Loop, Period: c.RatePeriod, SafeRate: c.SafeRate}
	if c.Sink == "http" {
		picker, weights, err := httpsink.Balanced(c.HTTPEndpoints)
		if err != nil {
			return nil, nil, err
		}
		rc.Weights = weights
		sink = httpsink.New(httpsink.Config{PoisonStatus: c.HTTPPoison}, picker, nil, consume.WallClock{})
	}
	stats := &consume.Stats{}
	store := ddbstore.New(dynamodb.NewFromConfig(aws), c.Table)
	peers := consume.LeaseOrFixed(c.Report, c.Loop, c.Consumers, store, stats, consume.WallClock{}, log)
	rates := consume.NewRateCache(rc, store, peers, consume.WallClock{}, log, stats)
	cons := consume.New(consume.Config{BatchSize: 10}, rates, sink, consume.WallClock{}, log, stats)
	return &sqsqueue.Handler{
		Consumer:      cons,
		API:           sqs.NewFromConfig(aws),
		DeadLetterURL: c.DeadLetterURL,
		QueueURL:      c.QueueURL,
		Log:           log,
		Metrics:       os.Stdout,
		Loop:          c.Loop,
	}, closer, nil
}

// openMySQL opens the destination database: the DSN read once from Secrets
// Manager (this runs once per container) or given in the environment, and
// the schema migrated unless migrations are a separate step (SLUICE_MIGRATE
// off: the runtime user then needs only INSERT and SELECT).
func openMySQL(ctx context.Context, c config, secrets dsnsecret.API) (*sql.DB, error) {
	dsn := c.MySQLDSN
	if c.MySQLSecret != "" {
		var err error
		if dsn, err = dsnsecret.Read(ctx, secrets, c.MySQLSecret); err != nil {
			return nil, err
		}
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("open MySQL: %w", err)
	}
	if c.Migrate {
		if err := mysqlsink.MigratePrefix(ctx, db, c.MySQL.Prefix); err != nil {
			db.Close()
			return nil, err
		}
	}
	return db, nil
}
