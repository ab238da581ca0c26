package kafkasource_test

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/kafkasource"
	"github.com/sluice-dev/sluice/pkg/adapter/memqueue"
	"github.com/sluice-dev/sluice/pkg/consume/consumetest"
)

// The scenarios below run on kfake (kafkasource_test.go) and on the real
// broker (broker_test.go).

// scenarioRebalance: a second consumer joins the group mid-stream, takes
// partitions, and the first is closed; nothing is missing and the group ends
// committed at the topic's end.
func scenarioRebalance(t *testing.T, brokers []string, topic, group string, n int) {
	createTopic(t, brokers, topic, 4)
	sink := memqueue.NewSink()
	ids := produce(t, brokers, topic, "m", 0, n/2, nil)

	a := &consumetest.CountingSink{Sink: sink}
	wa := startWorker(t, brokers, topic, group, a, 1000)
	waitFor(t, 60*time.Second, "the first consumer to store a fifth", func() bool { return sink.Len() >= n/5 })

	b := &consumetest.CountingSink{Sink: sink}
	wb := startWorker(t, brokers, topic, group, b, 1000)
	ids = append(ids, produce(t, brokers, topic, "m", n/2, n-n/2, nil)...)
	waitFor(t, 60*time.Second, "the second consumer to take partitions and store", func() bool { return b.Stored() > 0 })
	if got := wa.src.Stats().Revoked.Load(); got == 0 {
		t.Errorf("first consumer: %d partitions revoked after the second joined; want > 0", got)
	}
	wa.stop()
	waitFor(t, 60*time.Second, "every message stored", func() bool { return sink.Len() >= n })
	wb.stop()

	if m := missing(ids, sink.Has); len(m) > 0 {
		t.Errorf("%d of %d messages missing after a rebalance, e.g. %v", len(m), n, m[:min(len(m), 5)])
	}
	t.Logf("rebalance: sent %d, stored %d distinct, redelivered %d (absorbed by the idempotent sink); first consumer stored %d, second %d",
		n, sink.Len(), sink.Redelivered(), a.Stored(), b.Stored())
	checkNeverPastUnstored(t, brokers, group, topic, sink.Has)
	total := int64(0)
	for _, o := range committed(t, brokers, group, topic) {
		total += o
	}
	if total != int64(n) {
		t.Errorf("group %s committed %d offsets in all; want %d (everything stored)", group, total, n)
	}
}

// scenarioPoison: malformed records go to the dead-letter topic with their
// reason and origin, and the group commits past them.
func scenarioPoison(t *testing.T, brokers []string, topic, group string) {
	createTopic(t, brokers, topic, 2)
	createTopic(t, brokers, topic+".dlt", 1)
	isPoison := func(i int) bool { return i%5 == 4 }
	const n = 20
	ids := produce(t, brokers, topic, "p", 0, n, isPoison)
	sink := memqueue.NewSink()
	w := startWorker(t, brokers, topic, group, sink, 1e6)
	waitFor(t, 60*time.Second, "16 valid messages stored and 4 dead-lettered", func() bool {
		return sink.Len() == 16 && w.src.Stats().DeadLettered.Load() == 4
	})
	w.stop()

	dead := map[string]string{}
	for _, r := range readAll(t, brokers, topic+".dlt") {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if !strings.Contains(h[kafkasource.HeaderReason], "malformed payload") {
			t.Errorf("dead letter %s: reason %q; want it to say malformed payload", h[kafkasource.HeaderID], h[kafkasource.HeaderReason])
		}
		if !strings.HasPrefix(h[kafkasource.HeaderOrigin], topic+"/") {
			t.Errorf("dead letter %s: origin %q; want %s/partition/offset", h[kafkasource.HeaderID], h[kafkasource.HeaderOrigin], topic)
		}
		if !strings.HasPrefix(string(r.Value), "not json") {
			t.Errorf("dead letter %s: body %q; want the original body", h[kafkasource.HeaderID], r.Value)
		}
		dead[h[kafkasource.HeaderID]] = h[kafkasource.HeaderReason]
	}
	for i, id := range ids {
		switch _, isDead := dead[id]; {
		case isPoison(i) && !isDead:
			t.Errorf("poison %s not in %s.dlt", id, topic)
		case !isPoison(i) && !sink.Has(id):
			t.Errorf("valid %s not stored", id)
		}
	}
	if len(dead) != 4 {
		t.Errorf("%s.dlt holds %d distinct messages; want 4", topic, len(dead))
	}
	total := int64(0)
	for _, o := range committed(t, brokers, group, topic) {
		total += o
	}
	if total != n {
		t.Errorf("group committed %d offsets in all; want %d (stored and dead-lettered)", total, n)
	}
}

// Child process environment for scenarioKill.
const (
	envChild   = "SLUICE_KAFKASOURCE_CHILD"
	envBrokers = "SLUICE_KAFKASOURCE_BROKERS"
	envTopic   = "SLUICE_KAFKASOURCE_TOPIC"
	envGroup   = "SLUICE_KAFKASOURCE_GROUP"
	envFile    = "SLUICE_KAFKASOURCE_FILE"
)

// TestChildWorker is not a test: it is the consumer process that
// scenarioKill starts (go test re-exec) and SIGKILLs. It stores into a file
// and runs until SIGTERM.
func TestChildWorker(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("runs only as the child process of a kill scenario")
	}
	f, err := os.OpenFile(os.Getenv(envFile), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatalf("open sink file: %v", err)
	}
	defer f.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	w := startWorker(t, strings.Split(os.Getenv(envBrokers), ","), os.Getenv(envTopic), os.Getenv(envGroup), &fileSink{f: f}, 1000)
	<-ctx.Done()
	w.stop()
}

func startChild(t *testing.T, brokers []string, topic, group, file string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildWorker$", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=1", envBrokers+"="+strings.Join(brokers, ","), envTopic+"="+topic, envGroup+"="+group, envFile+"="+file)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child consumer: %v", err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// scenarioKill: a consumer process is SIGKILLed mid-stream (no commit, no
// leave) and a new one takes over; nothing is missing, and nothing was
// committed past an unstored record.
func scenarioKill(t *testing.T, brokers []string, topic, group string, n int) {
	createTopic(t, brokers, topic, 3)
	ids := produce(t, brokers, topic, "k", 0, n, nil)
	file := filepath.Join(t.TempDir(), "stored")

	first := startChild(t, brokers, topic, group, file)
	waitFor(t, 60*time.Second, "the first consumer to store a quarter", func() bool { _, l := readLines(t, file); return l >= n/4 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL first consumer: %v", err)
	}
	_ = first.Wait()
	stored, _ := readLines(t, file)
	checkNeverPastUnstored(t, brokers, group, topic, func(id string) bool { return stored[id] > 0 })
	atKill := len(stored)

	second := startChild(t, brokers, topic, group, file)
	waitFor(t, 90*time.Second, "the restarted consumer to store everything", func() bool { s, _ := readLines(t, file); return len(s) >= n })
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM second consumer: %v", err)
	}
	if err := second.Wait(); err != nil {
		t.Errorf("second consumer after SIGTERM: %v", err)
	}
	stored, lines := readLines(t, file)
	if m := missing(ids, func(id string) bool { return stored[id] > 0 }); len(m) > 0 {
		t.Errorf("%d of %d messages missing after SIGKILL, e.g. %v", len(m), n, m[:min(len(m), 5)])
	}
	t.Logf("kill: sent %d, %d distinct stored at SIGKILL, %d distinct in the end, %d redelivered after the kill (an idempotent sink absorbs them)", n, atKill, len(stored), lines-len(stored))
	checkNeverPastUnstored(t, brokers, group, topic, func(id string) bool { return stored[id] > 0 })
	total := int64(0)
	for _, o := range committed(t, brokers, group, topic) {
		total += o
	}
	if total != int64(n) {
		t.Errorf("group committed %d offsets in all after SIGTERM; want %d", total, n)
	}
}
