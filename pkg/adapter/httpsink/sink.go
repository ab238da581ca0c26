// Package httpsink stores consumed messages by POSTing them as JSON to an
// HTTP service, one request per message with an Idempotency-Key header (the
// message id) and a Content-Digest header (the body's SHA-256), over one or
// several endpoints chosen by a pluggable Picker.
//
// Only an answer that refuses the message for its content is poison: 400,
// 413, 415 and 422 by default (Config.PoisonStatus); the message goes to the
// dead-letter path with the status and the start of the response body as
// its reason. Every other failure is the destination's: unreachable, a
// timeout, 5xx, 429, 408, 409, 425, 401, 403, 404, and any 3xx (redirects
// are never followed: a client that follows a 302 turns the POST into a GET
// without a body and would count its 200 as stored). Those are retried with
// the project's backoff (consume.Backoff, full jitter, honouring
// Retry-After); a message still failing after the last attempt is retryable
// (released, redelivered later with the source's backoff).
//
// Credentials go in Config.Authorization (a header, from configuration or
// Secrets Manager) or, less well, in the URL; reasons and errors name an
// endpoint only through Redact, which hides the URL's userinfo and query
// values. Connections are pooled: at least Config.Parallel idle per host.
package httpsink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
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

// DefaultPoisonStatus returns the answers that refuse a message for its
// content (a new slice at every call).
func DefaultPoisonStatus() []int {
	return []int{
		http.StatusBadRequest, http.StatusRequestEntityTooLarge,
		http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity,
	}
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
	// PoisonStatus are the HTTP statuses that make a message poison
	// (default DefaultPoisonStatus). Every other non-2xx answer is a
	// failure of the destination and is retried.
	PoisonStatus []int
	// Authorization, when set, is the Authorization header of every
	// request ("Bearer ...", "Basic ..."): credentials read from
	// configuration or Secrets Manager instead of the endpoint's URL. It
	// never appears in a reason or a log line.
	Authorization string
	// Authorizer, when set, supplies the Authorization header instead (a
	// secret in Secrets Manager: SecretAuthorizer). After a 401 the sink
	// asks it once for a fresh value (the secret rotated) and retries the
	// request at once; a second 401 is the destination's failure.
	Authorizer Authorizer
	// ProbePath, when set, is what Probe asks for (GET), resolved against
	// the endpoint ("/healthz"); empty: the endpoint's URL itself.
	ProbePath string
}

// ParseStatuses parses a comma-separated list of HTTP statuses (as in
// SLUICE_HTTP_POISON_STATUS, e.g. "400,413,415,422"); each must be 400-499.
func ParseStatuses(list string) ([]int, error) {
	var out []int
	for _, f := range items(list) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 400 || n > 499 {
			return nil, fmt.Errorf("HTTP status %q: want a 4xx status (only a client error can be the message's fault)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// ParseEndpoints splits a comma-separated list of endpoint URLs (as in
// SLUICE_HTTP_ENDPOINTS), trims spaces, drops empty items and checks that
// each is an absolute http or https URL.
func ParseEndpoints(list string) ([]string, error) {
	var out []string
	for _, e := range items(list) {
		u, err := url.Parse(e)
		if err != nil {
			// url's error quotes the whole URL: leave it out.
			return nil, fmt.Errorf("HTTP endpoint %d of %d in the list: not a URL; want an absolute http:// or https:// URL", len(out)+1, len(items(list)))
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("HTTP endpoint %q: want an absolute http:// or https:// URL", Redact(e))
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("HTTP endpoints: the list holds no URL; want one or more comma-separated http:// or https:// URLs")
	}
	return out, nil
}

// items returns the comma-separated items of list, trimmed, without empty
// ones ("a, b," is [a b]).
func items(list string) []string {
	var out []string
	for _, x := range strings.Split(list, ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// Sink is the HTTP sink.
type Sink struct {
	cfg    Config
	client *http.Client
	picker Picker
	clock  consume.Clock
}

// New returns a Sink. client may be nil: a client with cfg.Timeout and a
// pooled transport that keeps at least Parallel idle connections per host,
// so that a batch reuses connections instead of opening (and handshaking)
// new ones on the destination. A client without a Transport gets the same
// transport; a client's *http.Transport that keeps fewer idle connections
// is cloned with more.
func New(cfg Config, picker Picker, client *http.Client, clock consume.Clock) *Sink {
	cfg.Timeout = defaults.Positive(cfg.Timeout, 5*time.Second)
	cfg.Attempts = defaults.Positive(cfg.Attempts, 4)
	cfg.BaseBackoff = defaults.Positive(cfg.BaseBackoff, 100*time.Millisecond)
	cfg.MaxBackoff = defaults.Positive(cfg.MaxBackoff, 2*time.Second)
	cfg.Parallel = defaults.Positive(cfg.Parallel, 8)
	if cfg.PoisonStatus == nil {
		cfg.PoisonStatus = DefaultPoisonStatus()
	}
	if client == nil {
		client = &http.Client{Timeout: cfg.Timeout}
	}
	// Never follow a redirect: the 3xx itself is the answer (a failure of
	// the destination). A copy, so that the caller's client is untouched.
	c := *client
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	c.Transport = pooled(c.Transport, cfg.Parallel)
	client = &c
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

// backoff is the project's policy (consume.Backoff, full jitter), or the
// server's Retry-After when it asked for one (capped by MaxBackoff).
func (s *Sink) backoff(attempt int, last error) time.Duration {
	var ra *retryAfter
	if errors.As(last, &ra) && ra.after > 0 {
		return min(ra.after, s.cfg.MaxBackoff)
	}
	return consume.Backoff{Base: s.cfg.BaseBackoff, Max: s.cfg.MaxBackoff}.Delay(attempt)
}

// pooled returns rt with at least parallel idle connections per host: a
// clone of http.DefaultTransport when rt is nil, a clone of an
// *http.Transport that keeps fewer, rt itself otherwise.
func pooled(rt http.RoundTripper, parallel int) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok || t.MaxIdleConnsPerHost >= parallel {
		return rt
	}
	t = t.Clone()
	t.MaxIdleConnsPerHost = parallel
	if t.MaxIdleConns != 0 && t.MaxIdleConns < parallel {
		t.MaxIdleConns = parallel
	}
	return t
}

// Redact returns endpoint as it may appear in a reason or a log line: the
// userinfo (user and password) and every query value replaced by
// "REDACTED", scheme, host and path kept. An endpoint that does not parse
// is replaced as a whole.
func Redact(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "(unparsable endpoint, redacted)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		u.RawQuery = q.Encode()
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// transportErr is err of a request without the URL the client puts in it
// (which holds the query and the user).
func transportErr(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

func (s *Sink) post(ctx context.Context, m consume.Message) error {
	raw := s.picker.Pick()
	endpoint := Redact(raw)
	auth, err := s.authorization(ctx, "")
	if err != nil {
		return fmt.Errorf("POST %s: %w: %w", endpoint, errRetry, err)
	}
	resp, snippet, err := s.do(ctx, raw, endpoint, m, auth)
	if err == nil && resp.StatusCode == http.StatusUnauthorized && s.cfg.Authorizer != nil {
		// The secret may have rotated: read it again, once, and retry.
		fresh, aerr := s.cfg.Authorizer.Authorization(ctx, auth)
		if aerr != nil {
			return fmt.Errorf("POST %s: HTTP 401, then %w: %w", endpoint, errRetry, aerr)
		}
		auth = fresh
		resp, snippet, err = s.do(ctx, raw, endpoint, m, auth)
	}
	if err != nil {
		return err
	}
	return s.classify(endpoint, resp, []byte(scrub(string(snippet), auth)))
}

// authorization is the request's Authorization value: the Authorizer's,
// else Config.Authorization.
func (s *Sink) authorization(ctx context.Context, stale string) (string, error) {
	if s.cfg.Authorizer == nil {
		return s.cfg.Authorization, nil
	}
	return s.cfg.Authorizer.Authorization(ctx, stale)
}

// do sends one POST of m to raw with auth and returns the answer and the
// start of its body (the body itself drained and closed).
func (s *Sink) do(ctx context.Context, raw, endpoint string, m consume.Message, auth string) (*http.Response, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, raw, bytes.NewReader(m.Body))
	if err != nil {
		// A bad endpoint is a configuration fault, never the message's.
		return nil, nil, fmt.Errorf("POST %s: %w: invalid endpoint URL", endpoint, errRetry)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.ID)
	// The body's digest (RFC 9530) lets the destination tell a retry (same
	// key, same body) from an id collision (same key, another body), which
	// the idempotency-key draft answers with 422: poison.
	sum := sha256.Sum256(m.Body)
	req.Header.Set("Content-Digest", "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, nil, fmt.Errorf("POST %s: %w: %w", endpoint, errRetry, transportErr(err))
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	return resp, snippet, nil
}

// classify maps an answer to nil (stored), a poison error, or an error
// wrapping errRetry (the destination's failure).
func (s *Sink) classify(endpoint string, resp *http.Response, snippet []byte) error {
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		return nil
	case slices.Contains(s.cfg.PoisonStatus, code):
		return fmt.Errorf("POST %s: HTTP %d %s: %s", endpoint, code, http.StatusText(code), bytes.TrimSpace(snippet))
	case code >= 300 && code < 400:
		return fmt.Errorf("POST %s: HTTP %d %s to %q, not followed: %w", endpoint, code, http.StatusText(code), resp.Header.Get("Location"), errRetry)
	}
	err := fmt.Errorf("POST %s: HTTP %d %s: %w", endpoint, code, http.StatusText(code), errRetry)
	if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && secs > 0 {
		return &retryAfter{err: err, after: time.Duration(secs) * time.Second}
	}
	return err
}
