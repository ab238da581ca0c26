package sqsqueue_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/sqsqueue"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
)

func TestQueueContract(t *testing.T) {
	consumetest.TestSource(t, func(t *testing.T) consumetest.SourceUnderTest {
		c, url, dlq := localSQS(t, 0)
		q := sqsqueue.New(c, sqsqueue.Config{QueueURL: url, DeadLetterURL: dlq, WaitTime: time.Second}, nil)
		t.Cleanup(q.Close)
		return consumetest.SourceUnderTest{
			Source: q,
			Send:   func(t *testing.T, bodies ...string) { send(t, c, url, bodies...) },
			Quiet:  1500 * time.Millisecond,
		}
	})
}
