package main

import (
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/functions/internal/functest"
)

func TestLoadConfig(t *testing.T) {
	base := map[string]string{"SLUICE_MYSQL_DSN": "u:p@tcp(h)/d"}
	with := func(kv ...string) map[string]string { return functest.With(base, kv...) }
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"SQS dead letters", with("SLUICE_DLQ_URL", "http://sqs/q"), ""},
		{"topic dead letters", with("SLUICE_KAFKA_DLT", "orders.dlt", "SLUICE_KAFKA_BROKERS", "b1:9092, b2:9092"), ""},
		{"no dead-letter destination", with(), "want a dead-letter destination"},
		{"both dead-letter destinations", with("SLUICE_DLQ_URL", "http://sqs/q", "SLUICE_KAFKA_DLT", "t.dlt", "SLUICE_KAFKA_BROKERS", "b:9092"), "not both"},
		{"topic without brokers", with("SLUICE_KAFKA_DLT", "t.dlt"), "SLUICE_KAFKA_BROKERS"},
		{"topic over MSK IAM", with("SLUICE_KAFKA_DLT", "t.dlt", "SLUICE_KAFKA_BROKERS", "b:9098", "SLUICE_KAFKA_TLS", "on", "SLUICE_KAFKA_SASL", "aws-msk-iam"), ""},
		{"topic with a bad SASL", with("SLUICE_KAFKA_DLT", "t.dlt", "SLUICE_KAFKA_BROKERS", "b:9092", "SLUICE_KAFKA_SASL", "plain"), "SLUICE_KAFKA_SASL"},
		{"shared settings checked", with("SLUICE_DLQ_URL", "http://sqs/q", "SLUICE_SAFE_RATE", "-1"), "SLUICE_SAFE_RATE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadConfig(func(k string) string { return tt.env[k] })
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("loadConfig(%v) = %v; want error containing %q", tt.env, err, tt.wantErr)
			}
		})
	}
	c, _ := loadConfig(func(k string) string {
		return with("SLUICE_KAFKA_DLT", "t.dlt", "SLUICE_KAFKA_BROKERS", "b1:9092, b2:9092")[k]
	})
	if len(c.KafkaBrokers) != 2 || c.KafkaBrokers[1] != "b2:9092" || c.Loop != "default" {
		t.Errorf("loadConfig brokers %q loop %q; want [b1:9092 b2:9092] default", c.KafkaBrokers, c.Loop)
	}
}
