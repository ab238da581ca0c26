package main

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/functions/internal/consumerenv"
	"github.com/sluice-dev/sluice/functions/internal/envconf"
	"github.com/sluice-dev/sluice/functions/internal/kafkaauth"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// config is the worker's configuration, read once from the environment.
type config struct {
	Source         string           // SOURCE: sqs or kafka
	Loop           string           // SLUICE_LOOP
	Table          string           // SLUICE_TABLE
	SafeRate       float64          // SLUICE_SAFE_RATE (aggregate msg/s)
	RatePeriod     time.Duration    // SLUICE_RATE_PERIOD
	Report         bool             // SLUICE_REPORT: on (default) keeps a lease and reports what was stored; off shares by SLUICE_CONSUMERS
	Consumers      int              // SLUICE_CONSUMERS: peers sharing the rate (ECS desired count)
	BatchSize      int              // SLUICE_BATCH_SIZE (default 10; SQS caps at 10)
	Sink           string           // SLUICE_SINK: mysql or http
	DB             consumerenv.DB   // SLUICE_MYSQL_DSN or SLUICE_MYSQL_SECRET; SLUICE_MIGRATE (off by default: migrations are `sluice migrate`)
	HTTPPoison     []int            // SLUICE_HTTP_POISON_STATUS: statuses that make a message poison (default 400,413,415,422)
	HTTPEndpoints  []string         // SLUICE_HTTP_ENDPOINTS
	HTTPTimeout    time.Duration    // SLUICE_HTTP_TIMEOUT: one request (default 5s)
	HTTPAuthSecret string           // SLUICE_HTTP_AUTH_SECRET: a Secrets Manager secret (name or ARN) holding the Authorization header
	QueueURL       string           // SLUICE_QUEUE_URL (sqs)
	DeadLetterURL  string           // SLUICE_DLQ_URL (sqs; empty: redrive policy)
	Visibility     time.Duration    // SLUICE_VISIBILITY (sqs, default 30s)
	KafkaBrokers   []string         // SLUICE_KAFKA_BROKERS (kafka)
	KafkaTopics    []string         // SLUICE_KAFKA_TOPICS
	KafkaGroup     string           // SLUICE_KAFKA_GROUP
	KafkaDLT       string           // SLUICE_KAFKA_DLT ("" = <topic>.dlt)
	KafkaAuth      kafkaauth.Config // SLUICE_KAFKA_TLS, SLUICE_KAFKA_SASL, ... (functions/internal/kafkaauth)
	MetricsAddr    string           // SLUICE_METRICS_ADDR (default 127.0.0.1:9102, loopback only; ":9102" for all interfaces; "off" disables)

	// MySQL is the MySQL sink's statement, table prefix and inbox retention
	// (SLUICE_MYSQL_STATEMENT or SLUICE_MYSQL_STATEMENT_FILE,
	// SLUICE_MYSQL_PREFIX, SLUICE_MYSQL_INBOX_RETENTION).
	MySQL mysqlsink.Config
}

func loadConfig(getenv func(string) string) (config, error) {
	r := envconf.New(getenv)
	c := config{
		Source: r.String("SOURCE", "sqs"), Loop: r.String("SLUICE_LOOP", "default"), Table: r.String("SLUICE_TABLE", ddbstore.DefaultTable),
		Sink: r.String("SLUICE_SINK", "mysql"), HTTPEndpoints: r.List("SLUICE_HTTP_ENDPOINTS"),
		QueueURL: getenv("SLUICE_QUEUE_URL"), DeadLetterURL: getenv("SLUICE_DLQ_URL"), HTTPAuthSecret: getenv("SLUICE_HTTP_AUTH_SECRET"),
		KafkaBrokers: r.List("SLUICE_KAFKA_BROKERS"), KafkaTopics: r.List("SLUICE_KAFKA_TOPICS"),
		KafkaGroup: r.String("SLUICE_KAFKA_GROUP", "sluice-worker"), KafkaDLT: getenv("SLUICE_KAFKA_DLT"),
		MetricsAddr: r.String("SLUICE_METRICS_ADDR", "127.0.0.1:9102"),
		Report:      envconf.Parse(r, "SLUICE_REPORT", consume.ParseReport),
		SafeRate:    r.Rate("SLUICE_SAFE_RATE", 10),
		RatePeriod:  r.Duration("SLUICE_RATE_PERIOD", consume.DefaultRatePeriod, "30s"),
		Visibility:  r.Duration("SLUICE_VISIBILITY", 30*time.Second, "30s"),
		HTTPTimeout: r.Duration("SLUICE_HTTP_TIMEOUT", 5*time.Second, "30s"),
		Consumers:   r.Count("SLUICE_CONSUMERS", 1),
		BatchSize:   r.Count("SLUICE_BATCH_SIZE", 10),
	}
	if err := r.Err(); err != nil {
		return c, err
	}
	switch c.Source {
	case "sqs":
		if c.QueueURL == "" {
			return c, fmt.Errorf("SOURCE=sqs needs SLUICE_QUEUE_URL")
		}
		c.BatchSize = min(c.BatchSize, 10)
	case "kafka":
		if len(c.KafkaBrokers) == 0 || len(c.KafkaTopics) == 0 {
			return c, fmt.Errorf("SOURCE=kafka needs SLUICE_KAFKA_BROKERS and SLUICE_KAFKA_TOPICS")
		}
		var err error
		if c.KafkaAuth, err = kafkaauth.Load(getenv); err != nil {
			return c, err
		}
	default:
		return c, fmt.Errorf("SOURCE=%q: want sqs or kafka", c.Source)
	}
	return c.withSink(getenv)
}

// withSink reads and checks the sink's settings.
func (c config) withSink(getenv func(string) string) (config, error) {
	if v := getenv("SLUICE_HTTP_POISON_STATUS"); v != "" {
		st, err := httpsink.ParseStatuses(v)
		if err != nil {
			return c, fmt.Errorf("SLUICE_HTTP_POISON_STATUS: %w", err)
		}
		c.HTTPPoison = st
	}
	switch c.Sink {
	case "mysql":
		var err error
		if c.DB, err = consumerenv.LoadDB(getenv, false, mysqlsink.WorkerConn()); err != nil {
			return c, err
		}
		m, err := mysqlsink.ConfigFromEnv(getenv)
		if err != nil {
			return c, err
		}
		m.Loop = c.Loop
		c.MySQL = m
	case "http":
		eps, err := httpsink.ParseEndpoints(getenv("SLUICE_HTTP_ENDPOINTS"))
		if err != nil {
			return c, fmt.Errorf("SLUICE_SINK=http needs SLUICE_HTTP_ENDPOINTS: %w", err)
		}
		c.HTTPEndpoints = eps
	default:
		return c, fmt.Errorf("SLUICE_SINK=%q: want mysql or http", c.Sink)
	}
	return c, nil
}
