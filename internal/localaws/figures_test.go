package localaws

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// What the stand-in mapping puts for its batches is read back through the
// CloudWatch reader as the controller reads a foreign consumer's figures:
// the mean Duration, the invocations and the deleted messages of the
// minute.
func TestFiguresReadAsTheControllerReadsThemMoto(t *testing.T) {
	ep := testenv.AWSEndpoint(t)
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	client := cwmetric.NewClient(cfg, ep)
	suffix := fmt.Sprint(time.Now().UnixNano())
	f := &Figures{API: client, Function: "fn-" + suffix, Queue: QueueName("http://127.0.0.1:9324/000000000000/q-" + suffix)}
	for _, ms := range []int{1000, 3000} {
		f.Record(BatchResult{Received: 10, Deleted: 10, Took: time.Duration(ms) * time.Millisecond})
	}
	f.Record(BatchResult{Received: 10, Deleted: 4, Failed: 6, Took: 2 * time.Second})
	at := time.Now().UTC().Add(-30 * time.Second)
	if err := f.put(ctx, at); err != nil {
		t.Fatal(err)
	}
	if err := f.put(ctx, at.Add(time.Second)); err != nil { // nothing since: 0 deleted
		t.Fatal(err)
	}
	got, err := cwmetric.New(client).ReadMetrics(ctx, loop.FunctionQueries(f.Function, "q-"+suffix, 5*time.Minute), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{2000, 3, 24} {
		if s := got[i]; s.Err != nil || !s.Found || s.Value != want {
			t.Errorf("%s: sample %+v; want %v", loop.FunctionQueries("", "", 0)[i].Metric, s, want)
		}
	}
}
