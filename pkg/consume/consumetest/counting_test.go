package consumetest_test

import (
	"context"
	"fmt"

	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
)

// A sink wrapped in a CountingSink counts the messages it stored: neither a
// message it refused nor a batch it failed counts.
func ExampleCountingSink() {
	inner := memqueue.NewSink()
	inner.Refuse = func(m consume.Message) string {
		if string(m.Body) == "bad" {
			return "not an order"
		}
		return ""
	}
	sink := &consumetest.CountingSink{Sink: inner}
	ctx := context.Background()
	batch := []consume.Message{{ID: "1", Body: []byte("a")}, {ID: "2", Body: []byte("bad")}}
	if _, err := sink.Store(ctx, batch); err != nil {
		fmt.Println(err)
	}
	inner.SetDown(true)
	_, err := sink.Store(ctx, []consume.Message{{ID: "3", Body: []byte("c")}})
	fmt.Println(sink.Stored(), "stored; then:", err)
	// Output: 1 stored; then: memqueue sink is down
}
