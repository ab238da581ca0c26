package httpsink_test

import (
	"testing"

	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
)

// The service under the sink stores by Idempotency-Key, as a real one must.
func TestSinkContract(t *testing.T) {
	consumetest.TestSink(t, func(t *testing.T) consumetest.SinkUnderTest {
		srv, ts := newServer(t)
		s := httpsink.New(httpsink.Config{}, httpsink.NewRoundRobin(ts.URL), nil, &noSleep{})
		return consumetest.SinkUnderTest{Sink: s, Count: func(*testing.T) int {
			srv.mu.Lock()
			defer srv.mu.Unlock()
			return len(srv.stored)
		}}
	})
}
