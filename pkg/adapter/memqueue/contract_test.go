package memqueue_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
)

func TestQueueContract(t *testing.T) {
	consumetest.TestSource(t, func(t *testing.T) consumetest.SourceUnderTest {
		q := memqueue.New()
		return consumetest.SourceUnderTest{
			Source: q,
			Send: func(t *testing.T, bodies ...string) {
				for _, b := range bodies {
					q.Send([]byte(b))
				}
			},
			Quiet: 50 * time.Millisecond,
		}
	})
}

func TestSinkContract(t *testing.T) {
	consumetest.TestSink(t, func(t *testing.T) consumetest.SinkUnderTest {
		s := memqueue.NewSink()
		return consumetest.SinkUnderTest{Sink: s, Count: func(*testing.T) int { return s.Len() }}
	})
}
