package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/functions/internal/consumerenv"
	"github.com/sluice-dev/sluice/functions/internal/envconf"
	"github.com/sluice-dev/sluice/functions/internal/kafkaauth"
	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
)

// config is the function's configuration, read once from the environment:
// the loop, rate and sink settings every consumer Lambda shares
// (consumerenv.Config), and where poison records go.
type config struct {
	consumerenv.Config
	// DeadLetterURL (SLUICE_DLQ_URL) is an SQS queue for poison records;
	// or DeadLetterTopic (SLUICE_KAFKA_DLT) a Kafka topic on
	// KafkaBrokers (SLUICE_KAFKA_BROKERS). Exactly one is needed.
	DeadLetterURL   string
	DeadLetterTopic string
	KafkaBrokers    []string
	// KafkaAuth is how the dead-letter topic's producer connects
	// (SLUICE_KAFKA_TLS, SLUICE_KAFKA_SASL, ...; see kafkaauth).
	KafkaAuth kafkaauth.Config
	// IDHeader (SLUICE_KAFKA_ID_HEADER, default message-id) names the
	// header carrying a producer-set message id.
	IDHeader string
}

func loadConfig(getenv func(string) string) (config, error) {
	base, err := consumerenv.Load(getenv)
	if err != nil {
		return config{}, err
	}
	c := config{Config: base, DeadLetterURL: getenv("SLUICE_DLQ_URL"), DeadLetterTopic: getenv("SLUICE_KAFKA_DLT"),
		IDHeader: getenv("SLUICE_KAFKA_ID_HEADER"), KafkaBrokers: envconf.New(getenv).List("SLUICE_KAFKA_BROKERS")}
	switch {
	case c.DeadLetterURL != "" && c.DeadLetterTopic != "":
		return c, fmt.Errorf("SLUICE_DLQ_URL and SLUICE_KAFKA_DLT: want one dead-letter destination, not both")
	case c.DeadLetterURL == "" && c.DeadLetterTopic == "":
		return c, fmt.Errorf("want a dead-letter destination for poison records: SLUICE_DLQ_URL (SQS) or SLUICE_KAFKA_DLT (topic)")
	case c.DeadLetterTopic != "" && len(c.KafkaBrokers) == 0:
		return c, fmt.Errorf("SLUICE_KAFKA_DLT=%s needs SLUICE_KAFKA_BROKERS", c.DeadLetterTopic)
	case c.DeadLetterTopic != "":
		c.KafkaAuth, err = kafkaauth.Load(getenv)
	}
	return c, err
}

// build wires the handler: the consumer (RATE reader, cache, sink) and the
// dead-letter destination. close releases the sink and the Kafka client.
func build(ctx context.Context, c config, log *slog.Logger) (*kafkasource.LambdaHandler, func(), error) {
	aws, cons, closeSink, err := consumerenv.Consumer(ctx, c.Config, log)
	if err != nil {
		return nil, nil, err
	}
	h := &kafkasource.LambdaHandler{Consumer: cons, IDHeader: c.IDHeader, Log: log, Metrics: os.Stdout, Loop: c.Loop}
	if c.DeadLetterURL != "" {
		h.DeadLetters = sqsqueue.DeadLetterQueue{API: sqs.NewFromConfig(aws), URL: c.DeadLetterURL}
		return h, closeSink, nil
	}
	auth, err := c.KafkaAuth.Opts(aws.Credentials)
	if err != nil {
		closeSink()
		return nil, nil, err
	}
	cl, err := kgo.NewClient(append(auth, kgo.SeedBrokers(c.KafkaBrokers...), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		closeSink()
		return nil, nil, fmt.Errorf("kafka client for %s: %w", c.DeadLetterTopic, err)
	}
	h.DeadLetters = kafkasource.TopicDeadLetters{Client: cl, Topic: c.DeadLetterTopic, Log: log}
	return h, func() { cl.Close(); closeSink() }, nil
}
