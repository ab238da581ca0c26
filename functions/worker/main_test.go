package main

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-dev/sluice/functions/internal/functest"
	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/consume"
)

func TestLoadConfig(t *testing.T) {
	sqs := map[string]string{"SLUICE_QUEUE_URL": "http://q", "SLUICE_MYSQL_DSN": "x"}
	with := functest.With
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
	}{
		{"sqs mysql", sqs, ""},
		{"kafka http", map[string]string{"SOURCE": "kafka", "SLUICE_KAFKA_BROKERS": "b:9092", "SLUICE_KAFKA_TOPICS": "t", "SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": "http://s"}, ""},
		{"sqs without queue", map[string]string{"SLUICE_MYSQL_DSN": "x"}, "SLUICE_QUEUE_URL"},
		{"kafka without topics", map[string]string{"SOURCE": "kafka", "SLUICE_KAFKA_BROKERS": "b", "SLUICE_MYSQL_DSN": "x"}, "SLUICE_KAFKA_TOPICS"},
		{"unknown source", with(sqs, "SOURCE", "rabbit"), "want sqs or kafka"},
		{"bad visibility", with(sqs, "SLUICE_VISIBILITY", "-3s"), "SLUICE_VISIBILITY"},
		{"bad batch", with(sqs, "SLUICE_BATCH_SIZE", "x"), "SLUICE_BATCH_SIZE"},
		{"http without endpoints", with(sqs, "SLUICE_SINK", "http"), "SLUICE_HTTP_ENDPOINTS"},
		{"report off", with(sqs, "SLUICE_REPORT", "off"), ""},
		{"bad report", with(sqs, "SLUICE_REPORT", "yes"), "SLUICE_REPORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(func(k string) string { return tt.env[k] })
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("loadConfig(%v) = %v; want error containing %q", tt.env, err, tt.wantErr)
			}
			if err == nil && c.Report != (tt.env["SLUICE_REPORT"] != "off") {
				t.Errorf("report %v with SLUICE_REPORT=%q; want on unless off", c.Report, tt.env["SLUICE_REPORT"])
			}
			if err == nil && c.Source == "sqs" && c.BatchSize > 10 {
				t.Errorf("SQS batch size %d; want <= 10", c.BatchSize)
			}
		})
	}
}

func TestRegistryExportsStats(t *testing.T) {
	stats := &consume.Stats{}
	stats.Consumed.Add(12)
	stats.Stored.Add(9)
	stats.Failed.Add(2)
	stats.Poison.Add(1)
	stats.RateFallbacks.Add(3)
	stats.Retried.Add(5)
	stats.Deferred.Add(4)
	reg := registry(stats, &actualRate{}, &depthGauge{}, fakeCounts{exhaustedN: 2, refusedN: 6, heldN: 3}, prometheus.Labels{"loop": "l"})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() == "sluice_consumer_dead_lettered_total" {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "reason" {
						got["dead_lettered/"+l.GetValue()] = m.GetCounter().GetValue()
					}
				}
			}
			continue
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			got[mf.GetName()] = c.GetValue()
		} else {
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	want := map[string]float64{
		"sluice_consumer_consumed_total": 12, "sluice_consumer_stored_total": 9, "sluice_consumer_failed_total": 2,
		"sluice_consumer_poison_total": 1, "sluice_consumer_rate_fallback_total": 3, "sluice_consumer_allowed_rate": 0,
		"sluice_consumer_actual_rate": 0, "sluice_consumer_queue_depth": 0, "sluice_consumer_rate_fallback": 0,
		"sluice_consumer_share_rate": 0, "sluice_consumer_retried_total": 5, "sluice_consumer_released_total": 4,
		"sluice_consumer_paced_seconds_total": 0, "sluice_consumer_dead_letter_refused_total": 6, "sluice_consumer_held": 3, "sluice_consumer_circuit_state": 0,
		"dead_lettered/retries_exhausted": 2, "dead_lettered/malformed": 0, "dead_lettered/id_collision": 0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v); want %v", k, g, ok, v)
		}
	}
	if finite(math.Inf(1)) != -1 {
		t.Errorf("finite(+Inf) = %v; want -1", finite(math.Inf(1)))
	}
}

func TestMetricsBindLoopbackByDefault(t *testing.T) {
	c, err := loadConfig(func(k string) string {
		return map[string]string{"SLUICE_QUEUE_URL": "http://q", "SLUICE_MYSQL_DSN": "x"}[k]
	})
	if err != nil || c.MetricsAddr != "127.0.0.1:9102" {
		t.Errorf("default metrics address %q (%v); want 127.0.0.1:9102", c.MetricsAddr, err)
	}
}

func TestLoadConfigTrimsLists(t *testing.T) {
	env := map[string]string{"SOURCE": "kafka", "SLUICE_KAFKA_BROKERS": "a:9092, b:9092", "SLUICE_KAFKA_TOPICS": " t1 ,t2,",
		"SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": "http://s1/in, http://s2/in"}
	c, err := loadConfig(func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("loadConfig: %v", err)
	}
	got := strings.Join(c.HTTPEndpoints, "|") + " " + strings.Join(c.KafkaBrokers, "|") + " " + strings.Join(c.KafkaTopics, "|")
	if want := "http://s1/in|http://s2/in a:9092|b:9092 t1|t2"; got != want {
		t.Errorf("lists = %q; want %q", got, want)
	}
}

// TestStopTimeoutCoversDrain: ECS waits stopTimeout after SIGTERM before it
// kills the worker; that must cover the worker's worst-case drain.
func TestStopTimeoutCoversDrain(t *testing.T) {
	b, err := os.ReadFile("../../infra/worker/task-definition.json")
	if err != nil {
		t.Fatal(err)
	}
	var td struct {
		ContainerDefinitions []struct {
			Name        string `json:"name"`
			StopTimeout int    `json:"stopTimeout"`
		} `json:"containerDefinitions"`
	}
	if err := json.Unmarshal(b, &td); err != nil {
		t.Fatal(err)
	}
	for _, c := range td.ContainerDefinitions {
		if got := time.Duration(c.StopTimeout) * time.Second; got <= drain() {
			t.Errorf("container %s: stopTimeout %v; want above the worst-case drain %v", c.Name, got, drain())
		}
	}
}

// fakeCounts is a source's counters.
type fakeCounts struct {
	exhaustedN, refusedN int64
	heldN                int
}

func (f fakeCounts) exhausted() int64  { return f.exhaustedN }
func (f fakeCounts) dlqRefused() int64 { return f.refusedN }
func (f fakeCounts) held() int         { return f.heldN }

// The worker's consumer runs the inner loop by the settings RATE carries.
func TestWorkerInnerLoopFollowsRate(t *testing.T) {
	functest.WantInnerLoopFollowsRate(t, consumerConfig(config{BatchSize: 10}))
}

// TestKafkaSourceCounts: on Kafka the worker exports the poison records
// the dead-letter topic refused and the records held back from the
// commit, as on SQS (sluice_consumer_dead_letter_refused_total,
// sluice_consumer_held), not 0 and -1.
func TestKafkaSourceCounts(t *testing.T) {
	src, err := kafkasource.New(kafkasource.Config{Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	src.Stats().DeadLetterRefused.Add(3)
	k := kafkaSource{src}
	if got := k.dlqRefused(); got != 3 {
		t.Errorf("dlqRefused() = %d; want the source's 3 refused dead letters", got)
	}
	if got := k.held(); got != 0 {
		t.Errorf("held() = %d; want the source's 0 records held", got)
	}
}
