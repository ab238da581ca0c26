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

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/testenv"
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
