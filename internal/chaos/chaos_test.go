package chaos_test

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/chaos"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// TestChaosShort runs every SQS scenario, two at a time, with a few
// hundred messages and durations / 20 (`make chaos` runs them at full
// size); mysql-down-15m is a 45-second outage at a 4 s tick with the function's backoffs scaled alike
// (SLUICE_CHAOS_BASELINE=1 plays it as before the probes through the
// function, which dead-letters healthy messages).
func TestChaosShort(t *testing.T) {
	ep := testenv.AWSEndpoint(t)
	rie := testenv.Binary(t, "SLUICE_RIE_BIN", "aws-lambda-rie")
	root := testenv.ModuleRoot(t)
	e := consumers.Env{AWSEndpoint: ep, SQSEndpoint: os.Getenv("AWS_ENDPOINT_URL_SQS"), RIE: rie, Root: root, WorkDir: t.TempDir(), Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	bins, err := chaos.Build(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	size := chaos.Short
	size.Baseline = os.Getenv("SLUICE_CHAOS_BASELINE") == "1"
	for _, sc := range chaos.Scenarios(size) {
		if !chosen(sc.Name, sc.Path) {
			continue
		}
		t.Run(sc.Name+"/"+sc.Path, func(t *testing.T) {
			// Each scenario has queues, a loop, RIE ports and a MariaDB
			// of its own, and spends most of its time waiting out its
			// fault: two at a time (go test's -parallel) took 290 s
			// where one at a time took 498.
			t.Parallel()
			r := chaos.Play(context.Background(), e, bins, sc)
			t.Logf("%+v", r)
			if !r.OK {
				t.Errorf("%s on %s: not ok: sent %d, stored %d, poison %d, dead-lettered %d (with reason %d), healthy dead-lettered %d, missing %d, duplicates %d, deadline hits %d, error %q",
					r.Name, r.Path, r.Sent, r.Stored, r.Poison, r.DeadLettered, r.PoisonWithReason, r.HealthyDeadLettered, r.Missing, r.Duplicates, r.LambdaDeadlineHits, r.Error)
			}
		})
	}
}

// TestChaosKafkaShort runs the Kafka scenarios with a few hundred records on
// the real broker.
func TestChaosKafkaShort(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	root := testenv.ModuleRoot(t)
	for _, sc := range chaos.KafkaScenarios(chaos.Size{Worker: 400, Scale: chaos.Short.Scale}) {
		sc.Limit = 4 * time.Minute
		sc.Rate = 200                                                                     // 2 s of records, paced alike in both runs
		sc.RetryBackoff = consume.Backoff{Base: 100 * time.Millisecond, Max: time.Second} // 10 attempts in about 5 s
		if !chosen(sc.Name, chaos.PathKafka) {
			continue
		}
		name := sc.Name
		if sc.MySQL && !strings.HasSuffix(name, "-mysql") {
			name += "-mysql"
		}
		t.Run(name, func(t *testing.T) {
			// A topic and a MariaDB of its own: two at a time, as the
			// SQS scenarios (111 s one at a time).
			t.Parallel()
			r := chaos.PlayKafka(context.Background(), root, strings.Split(brokers, ","), sc)
			t.Logf("%+v", r)
			if !r.OK {
				t.Errorf("%s: not ok: %+v", sc.Name, r)
			}
		})
	}
}

// TestChaosKafkaLambdaShort runs the kafka-lambda path's scenarios
// (mysql-down, http-answers, with poison records) with a few hundred
// records: the real kafka-consumer bootstrap under the emulator behind the
// emulated Kafka event source mapping, on the real broker.
func TestChaosKafkaLambdaShort(t *testing.T) {
	brokers := testenv.KafkaBrokers(t)
	rie := testenv.Binary(t, "SLUICE_RIE_BIN", "aws-lambda-rie")
	root := testenv.ModuleRoot(t)
	e := consumers.Env{Root: root, WorkDir: t.TempDir()}
	bin, err := e.Build(context.Background(), "./functions/kafka-consumer", "kafka-bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range chaos.KafkaLambdaScenarios(chaos.Size{Worker: 400, Scale: chaos.Short.Scale}, &chaos.KafkaLambda{Bootstrap: bin, RIE: rie}) {
		sc.Limit = 4 * time.Minute
		sc.Rate = 200
		if !chosen(sc.Name, chaos.PathKafkaLambda) {
			continue
		}
		t.Run(sc.Name, func(t *testing.T) {
			// A topic, a mapping and RIE ports of its own: two at a
			// time (70 s one at a time).
			t.Parallel()
			r := chaos.PlayKafka(context.Background(), root, strings.Split(brokers, ","), sc)
			t.Logf("%+v", r)
			if !r.OK || r.Path != chaos.PathKafkaLambda || r.DeadLettered != r.Poison || r.PoisonWithReason != r.Poison {
				t.Errorf("%s on %s: not ok, or poison %d dead-lettered %d (with reason %d): %+v", sc.Name, r.Path, r.Poison, r.DeadLettered, r.PoisonWithReason, r)
			}
		})
	}
}

// chosen says whether scenario name runs on path: all do unless
// SLUICE_CHAOS_ONLY names some (comma-separated), except the long fault
// scenarios, which run here only when it names them.
func chosen(name, path string) bool {
	only := os.Getenv("SLUICE_CHAOS_ONLY")
	if only == "" {
		return !chaosOnly(name, path)
	}
	return slices.Contains(strings.Split(only, ","), name)
}

// chaosOnly says whether the short version of a scenario is too long for
// `make test` (its budget is about 90 s for all of these): brownout-90,
// fk-order, mass-poison and silent-connection (HTTP or MySQL) take 40 to 100 s
// each even short on the SQS paths, so `make test` runs dlq-refuses on every path (17 to
// 29 s each), mass-poison on the Kafka worker, and silent-connection and
// fk-order on the Kafka paths (5 to 20 s each), and `make chaos` (or
// SLUICE_CHAOS_ONLY) the rest.
func chaosOnly(name, path string) bool {
	kafka := path == chaos.PathKafka || path == chaos.PathKafkaLambda
	switch name {
	case "brownout-90":
		return true
	case "silent-connection", "silent-connection-mysql", "fk-order":
		return !kafka
	case "mass-poison":
		return path != chaos.PathKafka
	}
	return false
}
