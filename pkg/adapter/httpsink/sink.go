// Package httpsink stores consumed messages by POSTing them as JSON to an
// HTTP service, one request per message with an Idempotency-Key header (the
// message id), over one or several endpoints chosen by a pluggable Picker.
// 5xx, 429, timeouts and connection errors are retried with exponential
// backoff and full jitter; a message still failing after the last attempt is
// retryable (released, redelivered later). A 4xx other than 429 is
// permanent: the message goes to the dead-letter path with the status and
// the start of the response body as its reason.
package httpsink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

var _ consume.Sink = (*Sink)(nil)

// Picker chooses the endpoint of the next request. pkg/balance plugs a
// smooth weighted round-robin in here; RoundRobin is the default.
type Picker interface {
	Pick() string
}

// RoundRobin picks endpoints in turn. Safe for concurrent use.
type RoundRobin struct {
	endpoints []string
	next      atomic.Uint64
}

var _ Picker = (*RoundRobin)(nil)

// NewRoundRobin returns a picker over endpoints (at least one).
func NewRoundRobin(endpoints ...string) *RoundRobin {
	return &RoundRobin{endpoints: endpoints}
}

// Pick returns the next endpoint.
func (r *RoundRobin) Pick() string {
	n := r.next.Add(1) - 1
	return r.endpoints[n%uint64(len(r.endpoints))]
}

// Config configures a Sink.
type Config struct {
	// Timeout bounds one request (default 5 s).
	Timeout time.Duration
	// Attempts is the most requests per message in one Store (default 4).
	Attempts int
	// BaseBackoff and MaxBackoff bound the exponential backoff between
	// attempts, with full jitter (defaults 100 ms and 2 s).
	BaseBackoff, MaxBackoff time.Duration
	// Parallel is how many requests of a batch run at once (default 8).
	Parallel int
}

// Sink is the HTTP sink.
type Sink struct {
	cfg    Config
	client *http.Client
	picker Picker
	clock  consume.Clock
}

// New returns a Sink. client may be nil (a client with cfg.Timeout).
func New(cfg Config, picker Picker, client *http.Client, clock consume.Clock) *Sink {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 4
	}
	if cfg.BaseBackoff <= 0 {
		cfg.BaseBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 2 * time.Second
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 8
	}
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout}
	}
	return &Sink{cfg: cfg, client: client, picker: picker, clock: clock}
}

// Store POSTs every message and returns its outcome. It never returns an
// error: failures are per message.
func (s *Sink) Store(ctx context.Context, msgs []consume.Message) ([]consume.Result, error) {
	res := make([]consume.Result, len(msgs))
	sem := make(chan struct{}, s.cfg.Parallel)
	var wg sync.WaitGroup
	for i := range msgs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			res[i] = s.storeOne(ctx, msgs[i])
		}()
	}
	wg.Wait()
	return res, nil
}

// errRetry marks an attempt whose failure may pass.
var errRetry = errors.New("retryable")

func (s *Sink) storeOne(ctx context.Context, m consume.Message) consume.Result {
	var last error
	for attempt := range s.cfg.Attempts {
		if attempt > 0 {
			if err := s.clock.Sleep(ctx, s.backoff(attempt, last)); err != nil {
				return consume.Result{Outcome: consume.Retryable, Reason: fmt.Sprintf("gave up after %d attempts: %v", attempt, last)}
			}
		}
		err := s.post(ctx, m)
		if err == nil {
			return consume.Result{Outcome: consume.Stored}
		}
		if !errors.Is(err, errRetry) {
			return consume.Result{Outcome: consume.Permanent, Reason: err.Error()}
		}
		last = err
	}
	return consume.Result{Outcome: consume.Retryable, Reason: fmt.Sprintf("gave up after %d attempts: %v", s.cfg.Attempts, last)}
}

// retryAfter is an error carrying the server's Retry-After.
type retryAfter struct {
	err   error
	after time.Duration
}

func (e *retryAfter) Error() string { return e.err.Error() }
func (e *retryAfter) Unwrap() error { return e.err }

// backoff is full jitter: uniform in [0, min(max, base*2^attempt)), or the
// server's Retry-After when it asked for one (capped by MaxBackoff).
func (s *Sink) backoff(attempt int, last error) time.Duration {
	var ra *retryAfter
	if errors.As(last, &ra) && ra.after > 0 {
		return min(ra.after, s.cfg.MaxBackoff)
	}
	ceil := s.cfg.BaseBackoff << min(attempt, 20)
	if ceil <= 0 || ceil > s.cfg.MaxBackoff {
		ceil = s.cfg.MaxBackoff
	}
	return rand.N(ceil)
}

func (s *Sink) post(ctx context.Context, m consume.Message) error {
	url := s.picker.Pick()
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(m.Body))
	if err != nil {
		return fmt.Errorf("POST %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.ID)
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w: %w", url, errRetry, err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		err := fmt.Errorf("POST %s: HTTP %d: %w", url, resp.StatusCode, errRetry)
		if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
			return &retryAfter{err: err, after: time.Duration(secs) * time.Second}
		}
		return err
	default:
		return fmt.Errorf("POST %s: HTTP %d: %s", url, resp.StatusCode, bytes.TrimSpace(snippet))
	}
}
