package kafka_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/bench/kafka"
	"github.com/sluice-dev/sluice/internal/testenv"
)

// rig is what the Kafka bench tests run on: the broker, the database and
// the binary under test, built under a context that ends after the test's
// time.
type rig struct {
	ctx     context.Context
	brokers []string
	dsn     string
	bin     string
}

// newRig checks the broker and the database and builds the binary with
// build (kafka.BuildWorker or kafka.BuildLambda).
func newRig(t *testing.T, timeout time.Duration, build func(ctx context.Context, moduleDir, dir string) (string, error)) rig {
	t.Helper()
	r := rig{brokers: strings.Split(testenv.KafkaBrokers(t), ","), dsn: testenv.MySQLDSN(t)}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	bin, err := build(ctx, testenv.ModuleRoot(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r.ctx, r.bin = ctx, bin
	return r
}

// TestNoLossSmall runs the kafka-worker scenario, smaller, against the real
// broker and MariaDB: real worker processes, a rebalance, a SIGKILL and a
// restart, poison to the dead-letter topic. The MariaDB restart is left to
// `make bench-consumers`: the test suite runs packages in parallel and other
// packages' tests share the server.
func TestNoLossSmall(t *testing.T) {
	r := newRig(t, 5*time.Minute, kafka.BuildWorker)
	var logs strings.Builder
	res, err := kafka.NoLoss(r.ctx, kafka.Config{
		Brokers: r.brokers, DSN: r.dsn, WorkerBin: r.bin,
		Messages: 1000, PoisonEvery: 100, Rate: 200, WorkerLog: &syncWriter{b: &logs},
	})
	t.Logf("result: %+v", res)
	if err != nil {
		t.Fatalf("NoLoss: %v\nworker logs (tail):\n%s", err, tail(logs.String(), 3000))
	}
	want := kafka.Result{NoLoss: consumers.NoLoss{Sent: 1000, Stored: 990, Poison: 10}, PoisonSent: 10}
	if res.Sent != want.Sent || res.Stored != want.Stored || res.Duplicates != 0 || res.Missing != 0 || res.Poison != want.Poison || res.PoisonSent != want.PoisonSent {
		t.Errorf("NoLoss = sent %d, stored %d, duplicates %d, missing %d, poison %d of %d; want sent 1000, stored 990, duplicates 0, missing 0, poison 10 of 10",
			res.Sent, res.Stored, res.Duplicates, res.Missing, res.Poison, res.PoisonSent)
	}
	if res.Uncommitted != 0 {
		t.Errorf("NoLoss: %d offsets uncommitted after SIGTERM; want 0", res.Uncommitted)
	}
	if res.PoisonWithReason != res.Poison {
		t.Errorf("NoLoss: %d of %d dead letters carry their reason; want all", res.PoisonWithReason, res.Poison)
	}
	if len(res.Faults) < 2 {
		t.Errorf("NoLoss injected faults %q; want the rebalance and the SIGKILL", res.Faults)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// syncWriter serializes the writes of several worker processes' log pipes.
type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// TestNoLossFull runs the benchmark's full scenario (10,000 messages, MariaDB
// restarted through $SLUICE_MARIADB_CTL) when SLUICE_KAFKA_BENCH_FULL=1; the
// benchmark program runs the same function.
func TestNoLossFull(t *testing.T) {
	if os.Getenv("SLUICE_KAFKA_BENCH_FULL") != "1" {
		t.Skip("set SLUICE_KAFKA_BENCH_FULL=1 to run the full benchmark scenario")
	}
	r := newRig(t, 10*time.Minute, kafka.BuildWorker)
	res, err := kafka.NoLoss(r.ctx, kafka.Config{
		Brokers: r.brokers, DSN: r.dsn, WorkerBin: r.bin, MariaDBCtl: os.Getenv("SLUICE_MARIADB_CTL"),
	})
	t.Logf("result: %+v", res)
	if err != nil {
		t.Fatalf("NoLoss: %v", err)
	}
	if res.Missing != 0 || res.Duplicates != 0 || res.Poison != res.PoisonSent || res.PoisonWithReason != res.Poison || res.Uncommitted != 0 {
		t.Errorf("NoLoss: missing %d, duplicates %d, poison %d of %d (%d with reason), uncommitted %d; want 0, 0, all (all), 0",
			res.Missing, res.Duplicates, res.Poison, res.PoisonSent, res.PoisonWithReason, res.Uncommitted)
	}
}

// TestNoLossLambdaSmall runs the kafka-lambda path with 1,000 messages: the
// real kafka-consumer bootstrap under the emulator behind the emulated
// Kafka event source mapping, on the real broker, into MariaDB, with a
// rebalance and a member SIGKILLed mid-batch: nothing missing, nothing
// duplicated, every poison record dead-lettered once with its reason, every
// offset committed.
func TestNoLossLambdaSmall(t *testing.T) {
	rie := testenv.Binary(t, "SLUICE_RIE_BIN", "aws-lambda-rie")
	r := newRig(t, 5*time.Minute, kafka.BuildLambda)
	var logs strings.Builder
	res, err := kafka.NoLoss(r.ctx, kafka.Config{
		Brokers: r.brokers, DSN: r.dsn, Lambda: &kafka.Lambda{Bootstrap: r.bin, RIE: rie, BatchSize: 50},
		Messages: 1000, PoisonEvery: 100, Rate: 200, WorkerLog: &syncWriter{b: &logs},
	})
	t.Logf("result: %+v", res)
	if err != nil {
		t.Fatalf("NoLoss: %v\nfunction logs (tail):\n%s", err, tail(logs.String(), 3000))
	}
	if res.Path != kafka.LambdaPath || res.Sent != 1000 || res.Stored != 990 || res.Duplicates != 0 || res.Missing != 0 || res.Poison != 10 || res.PoisonSent != 10 {
		t.Errorf("NoLoss = %s sent %d, stored %d, duplicates %d, missing %d, poison %d of %d; want kafka-lambda sent 1000, stored 990, duplicates 0, missing 0, poison 10 of 10",
			res.Path, res.Sent, res.Stored, res.Duplicates, res.Missing, res.Poison, res.PoisonSent)
	}
	if res.Uncommitted != 0 || res.PoisonWithReason != res.Poison {
		t.Errorf("NoLoss: %d offsets uncommitted, %d of %d dead letters with their reason; want 0 and all", res.Uncommitted, res.PoisonWithReason, res.Poison)
	}
}

// TestPaceLambda measures the kafka-lambda path's pacing with 1 and 4
// partitions (one emulated mapping member each) at 40 msg/s over short
// windows: the functions store at the allowed rate, never above it by more
// than a batch's burst. `make bench-consumers` measures longer windows.
func TestPaceLambda(t *testing.T) {
	rie := testenv.Binary(t, "SLUICE_RIE_BIN", "aws-lambda-rie")
	r := newRig(t, 5*time.Minute, kafka.BuildLambda)
	const rate, batch, window = 40, 20, 6 * time.Second
	for _, parts := range []int32{1, 4} {
		var logs strings.Builder
		pt, err := kafka.PaceLambda(r.ctx, kafka.Pacing{Window: window, Windows: 1, Config: kafka.Config{
			Brokers: r.brokers, DSN: r.dsn, Partitions: parts, Rate: rate, WorkerLog: &syncWriter{b: &logs},
			Lambda: &kafka.Lambda{Bootstrap: r.bin, RIE: rie, BatchSize: batch},
		}})
		t.Logf("pacing: %+v", pt)
		if err != nil {
			t.Fatalf("PaceLambda(%d partitions): %v\nfunction logs (tail):\n%s", parts, err, tail(logs.String(), 3000))
		}
		// A window counts whole batches: it may hold one batch per
		// partition more than the rate allows, never more (a busy
		// machine only stores fewer).
		burstPct := 100 * float64(int(parts)*batch) / (rate * window.Seconds())
		if pt.Achieved <= 0 || pt.ErrorPct > burstPct {
			t.Errorf("PaceLambda(%d partitions) achieved %.1f msg/s at %d allowed (%+.1f %%); want at most one batch per partition above it (%+.1f %%)",
				parts, pt.Achieved, rate, pt.ErrorPct, burstPct)
		}
	}
}
