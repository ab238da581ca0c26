package consume_test

import (
	"context"
	"testing"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// retrySource counts the messages given back by Retry and by RetryOutage
// (the batches are made by hand, not received from its queue).
type retrySource struct {
	retried, outage int
}

func (s *retrySource) Receive(context.Context, int) ([]consume.Message, error) { return nil, nil }
func (s *retrySource) Ack(context.Context, []consume.Message) error            { return nil }
func (s *retrySource) Release(context.Context, []consume.Message) error        { return nil }

func (s *retrySource) Retry(_ context.Context, msgs []consume.Message, _ string) error {
	s.retried += len(msgs)
	return nil
}

func (s *retrySource) RetryOutage(_ context.Context, msgs []consume.Message, _ string) error {
	s.outage += len(msgs)
	return nil
}

// A message that fails while the destination takes the others is given
// back with Retry (its own attempts count); what fails in a brownout, nine
// in ten failed, with RetryOutage (a source that bounds attempts does not
// count them).
func TestSettleTellsAnOutageFromAMessagesFault(t *testing.T) {
	for _, c := range []struct {
		name                string
		store               int // of ten
		wantRetry, wantDown bool
	}{
		{"one in ten fails", 9, true, false},
		{"brownout, nine in ten fail", 1, false, true},
	} {
		sink := &ratioSink{store: c.store}
		cons, _, _ := loggedConsumer(sink)
		src := &retrySource{}
		ctx := context.Background()
		var outage bool
		for b := range 3 {
			rep := cons.Process(ctx, tenFresh(b))
			outage = outage || rep.Outage
			if err := cons.Settle(ctx, src, rep); err != nil {
				t.Fatal(err)
			}
		}
		if (src.retried > 0) != c.wantRetry || (src.outage > 0) != c.wantDown || outage != c.wantDown {
			t.Errorf("%s: %d given back by Retry, %d by RetryOutage, Report.Outage %v; want Retry %v, RetryOutage %v",
				c.name, src.retried, src.outage, outage, c.wantRetry, c.wantDown)
		}
	}
}
