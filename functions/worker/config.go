package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/functions/internal/kafkaauth"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// config is the worker's configuration, read once from the environment.
type config struct {
	Source        string           // SOURCE: sqs or kafka
	Loop          string           // SLUICE_LOOP
	Table         string           // SLUICE_TABLE
	SafeRate      float64          // SLUICE_SAFE_RATE (aggregate msg/s)
	RatePeriod    time.Duration    // SLUICE_RATE_PERIOD
	Report        bool             // SLUICE_REPORT: on (default) keeps a lease and reports what was stored; off shares by SLUICE_CONSUMERS
	Consumers     int              // SLUICE_CONSUMERS: peers sharing the rate (ECS desired count)
	BatchSize     int              // SLUICE_BATCH_SIZE (default 10; SQS caps at 10)
	Sink          string           // SLUICE_SINK: mysql or http
	MySQLDSN      string           // SLUICE_MYSQL_DSN
	HTTPPoison    []int            // SLUICE_HTTP_POISON_STATUS: statuses that make a message poison (default 400,413,415,422)
	HTTPEndpoints []string         // SLUICE_HTTP_ENDPOINTS
	HTTPTimeout   time.Duration    // SLUICE_HTTP_TIMEOUT: one request (default 5s)
	QueueURL      string           // SLUICE_QUEUE_URL (sqs)
	DeadLetterURL string           // SLUICE_DLQ_URL (sqs; empty: redrive policy)
	Visibility    time.Duration    // SLUICE_VISIBILITY (sqs, default 30s)
	KafkaBrokers  []string         // SLUICE_KAFKA_BROKERS (kafka)
	KafkaTopics   []string         // SLUICE_KAFKA_TOPICS
	KafkaGroup    string           // SLUICE_KAFKA_GROUP
	KafkaDLT      string           // SLUICE_KAFKA_DLT ("" = <topic>.dlt)
	KafkaAuth     kafkaauth.Config // SLUICE_KAFKA_TLS, SLUICE_KAFKA_SASL, ... (functions/internal/kafkaauth)
	MetricsAddr   string           // SLUICE_METRICS_ADDR (default 127.0.0.1:9102, loopback only; ":9102" for all interfaces; "off" disables)

	// MySQL is the MySQL sink's statement, table prefix and inbox retention
	// (SLUICE_MYSQL_STATEMENT or SLUICE_MYSQL_STATEMENT_FILE,
	// SLUICE_MYSQL_PREFIX, SLUICE_MYSQL_INBOX_RETENTION).
	MySQL mysqlsink.Config
}

// list splits a comma-separated list, trimming spaces and dropping empty
// items ("a, b," is [a b]).
func list(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		Source: getenv("SOURCE"), Loop: getenv("SLUICE_LOOP"), Table: getenv("SLUICE_TABLE"),
		Sink: getenv("SLUICE_SINK"), MySQLDSN: getenv("SLUICE_MYSQL_DSN"), HTTPEndpoints: list(getenv("SLUICE_HTTP_ENDPOINTS")),
		QueueURL: getenv("SLUICE_QUEUE_URL"), DeadLetterURL: getenv("SLUICE_DLQ_URL"),
		KafkaBrokers: list(getenv("SLUICE_KAFKA_BROKERS")), KafkaTopics: list(getenv("SLUICE_KAFKA_TOPICS")),
		KafkaGroup: getenv("SLUICE_KAFKA_GROUP"), KafkaDLT: getenv("SLUICE_KAFKA_DLT"), MetricsAddr: getenv("SLUICE_METRICS_ADDR"),
		SafeRate: 10, RatePeriod: consume.DefaultRatePeriod, Consumers: 1, BatchSize: 10, Visibility: 30 * time.Second, HTTPTimeout: 5 * time.Second,
	}
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Source, "sqs")
	def(&c.Loop, "default")
	def(&c.Table, ddbstore.DefaultTable)
	def(&c.Sink, "mysql")
	def(&c.KafkaGroup, "sluice-worker")
	def(&c.MetricsAddr, "127.0.0.1:9102")
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
	for _, d := range []struct {
		env string
		p   *time.Duration
	}{{"SLUICE_RATE_PERIOD", &c.RatePeriod}, {"SLUICE_VISIBILITY", &c.Visibility}, {"SLUICE_HTTP_TIMEOUT", &c.HTTPTimeout}} {
		if v := getenv(d.env); v != "" {
			x, err := time.ParseDuration(v)
			if err != nil || x <= 0 {
				return c, fmt.Errorf("%s=%q: want a positive duration such as 30s", d.env, v)
			}
			*d.p = x
		}
	}
	for _, n := range []struct {
		env string
		p   *int
	}{{"SLUICE_CONSUMERS", &c.Consumers}, {"SLUICE_BATCH_SIZE", &c.BatchSize}} {
		if v := getenv(n.env); v != "" {
			x, err := strconv.Atoi(v)
			if err != nil || x < 1 {
				return c, fmt.Errorf("%s=%q: want a count >= 1", n.env, v)
			}
			*n.p = x
		}
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
		if c.MySQLDSN == "" {
			return c, fmt.Errorf("SLUICE_SINK=mysql needs SLUICE_MYSQL_DSN")
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
