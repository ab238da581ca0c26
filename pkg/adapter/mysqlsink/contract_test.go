package mysqlsink_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
)

// retrying retries a Store that failed (the database restarted by another
// package's fault-injection test), as the consumer would.
type retrying struct{ consume.Sink }

func (r retrying) Store(ctx context.Context, msgs []consume.Message) (res []consume.Result, err error) {
	err = retry(func() error { res, err = r.Sink.Store(ctx, msgs); return err })
	return res, err
}

func TestSinkContract(t *testing.T) {
	consumetest.TestSink(t, func(t *testing.T) consumetest.SinkUnderTest {
		db := open(t)
		return consumetest.SinkUnderTest{Sink: retrying{mysqlsink.New(db)}, Count: func(t *testing.T) int { return rows(t, db) }}
	})
}
