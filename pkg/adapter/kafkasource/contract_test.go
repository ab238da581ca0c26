package kafkasource_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
)

// contract runs the consume.Source contract suite on a fresh topic and group.
func contract(t *testing.T, brokers func(t *testing.T, topic string) []string) {
	consumetest.TestSource(t, func(t *testing.T) consumetest.SourceUnderTest {
		topic := fmt.Sprintf("sluice-contract-%d", time.Now().UnixNano())
		bs := brokers(t, topic)
		createTopic(t, bs, topic+".dlt", 1)
		prod := client(t, bs, kgo.DefaultProduceTopic(topic))
		return consumetest.SourceUnderTest{
			Source: newSource(t, bs, topic, topic, nil),
			Send: func(t *testing.T, bodies ...string) {
				recs := make([]*kgo.Record, len(bodies))
				for i, b := range bodies {
					recs[i] = &kgo.Record{Value: []byte(b)}
				}
				if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
					t.Fatalf("produce: %v", err)
				}
			},
			Quiet: time.Second,
		}
	})
}

func TestSourceContractFake(t *testing.T) {
	contract(t, func(t *testing.T, topic string) []string { return newFake(t, topic, 2).ListenAddrs() })
}

func TestBrokerSourceContract(t *testing.T) {
	contract(t, func(t *testing.T, topic string) []string {
		bs := strings.Split(testenv.KafkaBrokers(t), ",")
		createTopic(t, bs, topic, 2)
		return bs
	})
}
