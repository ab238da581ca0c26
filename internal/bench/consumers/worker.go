package consumers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// FaultyService is an HTTP service in front of MariaDB that fails on
// demand: deterministic shares of its requests get 503, 429, or store and
// then answer too late for the client's timeout (so the client retries a
// request that was in fact stored: the Idempotency-Key must absorb it).
type FaultyService struct {
	sink                       *mysqlsink.Sink
	n                          atomic.Int64
	Failed503, Failed429, Slow atomic.Int64
	// SlowFor is how long a slow answer takes.
	SlowFor time.Duration
}

func (f *FaultyService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := f.n.Add(1)
	key := r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(r.Body)
	if err != nil || key == "" {
		http.Error(w, "want a body and an Idempotency-Key", http.StatusBadRequest)
		return
	}
	switch {
	case n%10 == 3:
		f.Failed503.Add(1)
		http.Error(w, "injected failure", http.StatusServiceUnavailable)
		return
	case n%20 == 7:
		f.Failed429.Add(1)
		http.Error(w, "slow down", http.StatusTooManyRequests)
		return
	}
	res, err := f.sink.Store(r.Context(), []consume.Message{{ID: key, Body: body}})
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	if res[0].Outcome == consume.Permanent {
		http.Error(w, res[0].Reason, http.StatusUnprocessableEntity)
		return
	}
	if n%97 == 5 {
		f.Slow.Add(1)
		time.Sleep(f.SlowFor)
	}
	w.WriteHeader(http.StatusCreated)
}

// Worker is the worker binary running as a child process.
type Worker struct {
	bin     string
	env     []string
	log     io.Writer
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has exited
	err     error         // cmd's exit error, set before exited closes
	Metrics string        // metrics URL
}

// StartWorker builds nothing: bin is the built worker.
func (e Env) StartWorker(bin string, env map[string]string, log io.Writer) (*Worker, error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	env["SLUICE_METRICS_ADDR"] = "127.0.0.1:" + strconv.Itoa(port)
	w := &Worker{bin: bin, env: e.childEnv(env), log: log, Metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", port)}
	return w, w.start()
}

func (w *Worker) start() error {
	w.cmd = exec.Command(w.bin)
	w.cmd.Env, w.cmd.Stdout, w.cmd.Stderr = w.env, w.log, w.log
	if err := w.cmd.Start(); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	w.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { w.err = c.Wait(); close(done) }(w.cmd, w.exited)
	return nil
}

// Kill sends SIGKILL and waits for the process to go; a worker that has
// already exited is left alone.
func (w *Worker) Kill() {
	select {
	case <-w.exited:
		return
	default:
	}
	w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.exited
}

// Terminate sends SIGTERM and waits up to grace for a clean exit.
func (w *Worker) Terminate(grace time.Duration) error {
	w.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-w.exited:
		if w.err != nil {
			return fmt.Errorf("worker exit after SIGTERM: %w", w.err)
		}
		return nil
	case <-time.After(grace):
		w.Kill()
		return fmt.Errorf("worker did not exit within %v of SIGTERM", grace)
	}
}

// Restart starts the worker again.
func (w *Worker) Restart() error { return w.start() }

// Scrape returns the worker's /metrics text.
func (w *Worker) Scrape(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, w.Metrics, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// SQSWorker is the sqs-worker no-loss scenario: the real worker binary on
// a real queue, storing through an HTTP service that fails and times out on
// demand into MariaDB; the worker is killed with SIGKILL at a third of the
// messages and restarted, stopped with SIGTERM at two thirds and restarted.
func SQSWorker(ctx context.Context, e Env, o Options) (NoLoss, error) {
	return e.noLoss(ctx, o, "sqs-worker", "worker", "./functions/worker", "worker", e.sqsWorker)
}

// sqsWorker sends the messages, runs the worker behind the faulty HTTP
// service, kills and stops it until the queue is drained; it returns the
// poison sequence numbers.
func (e Env) sqsWorker(ctx context.Context, rg *rig, o Options, res *NoLoss) (map[int]bool, error) {
	db, st := rg.db, rg.st
	svc := &FaultyService{sink: mysqlsink.New(db), SlowFor: 1500 * time.Millisecond}
	srv := httptest.NewServer(svc)
	defer srv.Close()
	poison, err := Produce(ctx, st.SQS, st.QueueURL, o.Messages, o.PoisonEvery)
	if err != nil {
		return nil, err
	}
	w, err := e.StartWorker(rg.bin, map[string]string{
		"SOURCE": "sqs", "SLUICE_QUEUE_URL": st.QueueURL, "SLUICE_DLQ_URL": st.DLQURL, "SLUICE_VISIBILITY": "6s",
		"SLUICE_LOOP": st.Loop, "SLUICE_TABLE": st.Table, "SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": srv.URL,
		"SLUICE_HTTP_TIMEOUT": "1s", "SLUICE_SAFE_RATE": "50",
	}, rg.log)
	if err != nil {
		return nil, err
	}
	defer w.Kill()
	res.Faults = append(res.Faults, "http 503 (1 in 10), 429 (1 in 20), stored-then-timeout (1 in 97)")

	if err := waitUntil(ctx, func() (bool, error) { return rows(ctx, db) >= o.Messages/3, nil }); err != nil {
		return nil, fmt.Errorf("waiting for a third: %w", err)
	}
	w.Kill()
	res.Faults = append(res.Faults, fmt.Sprintf("worker SIGKILL at %d rows, restarted", rows(ctx, db)))
	if err := w.Restart(); err != nil {
		return nil, err
	}
	if err := waitUntil(ctx, func() (bool, error) { return rows(ctx, db) >= 2*o.Messages/3, nil }); err != nil {
		return nil, fmt.Errorf("waiting for two thirds: %w", err)
	}
	if err := w.Terminate(30 * time.Second); err != nil {
		return nil, err
	}
	res.Faults = append(res.Faults, fmt.Sprintf("worker SIGTERM at %d rows, restarted", rows(ctx, db)))
	if err := w.Restart(); err != nil {
		return nil, err
	}
	if err := rg.drained(ctx); err != nil {
		return nil, err
	}
	metrics, err := w.Scrape(ctx)
	if err != nil || !strings.Contains(metrics, "sluice_consumer_stored_total") {
		return nil, fmt.Errorf("scrape %s: %v (got %d bytes)", w.Metrics, err, len(metrics))
	}
	if err := w.Terminate(30 * time.Second); err != nil {
		return nil, err
	}
	res.Faults = append(res.Faults, fmt.Sprintf("http: %d x 503, %d x 429, %d slow", svc.Failed503.Load(), svc.Failed429.Load(), svc.Slow.Load()))
	return poison, nil
}
