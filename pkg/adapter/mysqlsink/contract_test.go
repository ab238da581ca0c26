package mysqlsink_test

import (
	"testing"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
)

func TestSinkContract(t *testing.T) {
	consumetest.TestSink(t, func(t *testing.T) consumetest.SinkUnderTest {
		db := open(t)
		return consumetest.SinkUnderTest{Sink: mysqlsink.New(db), Count: func(t *testing.T) int { return rows(t, db) }}
	})
}
