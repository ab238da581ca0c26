// Package functest is what the functions' tests share: the real bootstrap,
// built and started under the Runtime Interface Emulator against the local
// services, and a buffer that collects its output.
package functest

import (
	"bytes"
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Logs is a log sink shared with the emulator's output; it is safe for
// concurrent use.
type Logs struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Bootstrap builds the function pkg (such as ./functions/sqs-consumer, from
// the module root two levels above the test's directory) as bootstrap with
// -tags lambda.norpc, and starts it under the emulator with env, SQS on
// sqsEndpoint ("" is the AWS endpoint). The emulator stops when the test
// ends. It skips the test when the endpoint or the emulator is missing.
func Bootstrap(ctx context.Context, t *testing.T, pkg, sqsEndpoint string, env map[string]string) (*consumers.RIE, *Logs) {
	t.Helper()
	root, _ := filepath.Abs("../..")
	e := consumers.Env{AWSEndpoint: testenv.AWSEndpoint(t), SQSEndpoint: sqsEndpoint,
		RIE: testenv.Binary(t, "SLUICE_RIE_BIN", "aws-lambda-rie"), Root: root, WorkDir: t.TempDir(),
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	bin, err := e.Build(ctx, pkg, "bootstrap")
	if err != nil {
		t.Fatal(err)
	}
	logs := &Logs{}
	fn, err := e.StartRIE(ctx, bin, env, logs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fn.Stop)
	return fn, logs
}

// With returns a copy of the environment base with the pairs kv (name,
// value, name, value, ...) set.
func With(base map[string]string, kv ...string) map[string]string {
	env := maps.Clone(base)
	if env == nil {
		env = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// WantInnerLoopFollowsRate checks that a consumer built from cfg (a
// function's own consume.Config) runs the inner loop while RATE carries its
// settings and none while it does not: how PARAMS inner_loop reaches the
// deployed consumers, which never read PARAMS.
func WantInnerLoopFollowsRate(t *testing.T, cfg consume.Config) {
	t.Helper()
	rates := memqueue.NewRates()
	rc := consume.NewRateCache(consume.RateCacheConfig{Loop: "l", Period: time.Nanosecond}, rates, consume.FixedPeers(1), consume.WallClock{}, nil, nil)
	c := consume.New(cfg, rc, storeAll{}, consume.WallClock{}, nil, nil)
	process := func() {
		t.Helper()
		if rep := c.Process(context.Background(), []consume.Message{{ID: "m", Body: []byte(`{"a":1}`)}}); len(rep.Stored) != 1 {
			t.Fatalf("Process: %+v; want the message stored", rep)
		}
	}
	for _, in := range []*protocol.InnerSettings{nil, {Tolerance: 0.3, ReactionTime: 40 * time.Second}, nil} {
		rates.Put(protocol.Rate{Loop: "l", PerSecond: 1e6, Inner: in})
		process()
		l, on := c.InnerLoop()
		if on != (in != nil) || (on && (l.Config.Tolerance != in.Tolerance || l.Config.ReactionTime != in.ReactionTime)) {
			t.Errorf("RATE.Inner %+v: the consumer's inner loop %+v, on %v; want it to follow RATE", in, l.Config, on)
		}
	}
}

// storeAll is a sink that stores every message at once.
type storeAll struct{}

func (storeAll) Store(_ context.Context, m []consume.Message) ([]consume.Result, error) {
	return make([]consume.Result, len(m)), nil
}
