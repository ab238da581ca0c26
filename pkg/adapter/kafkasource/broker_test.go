package kafkasource_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
)

// The same scenarios against the real Kafka broker (SLUICE_KAFKA_BROKERS),
// on topics and groups named per run so that reruns start clean.

func brokerRun(t *testing.T, name string) (brokers []string, topic, group string) {
	t.Helper()
	b := testenv.KafkaBrokers(t)
	run := fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	return strings.Split(b, ","), "sluice-test-" + run, "sluice-test-" + run
}

func TestBrokerRebalanceNoLoss(t *testing.T) {
	brokers, topic, group := brokerRun(t, "rebalance")
	scenarioRebalance(t, brokers, topic, group, 2000)
}

func TestBrokerKilledConsumerNoLoss(t *testing.T) {
	brokers, topic, group := brokerRun(t, "kill")
	scenarioKill(t, brokers, topic, group, 2000)
}

func TestBrokerPoisonToDeadLetterTopic(t *testing.T) {
	brokers, topic, group := brokerRun(t, "poison")
	scenarioPoison(t, brokers, topic, group)
}
