// Package prommetric reads a loop's measurement from Prometheus through its
// HTTP API (/api/v1/query): a PromQL expression that returns one series, and
// the timestamp of its newest sample, which decides staleness.
package prommetric

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// Doer sends HTTP requests; *http.Client satisfies it.
type Doer interface {
	Do(req *http.Request) (*http.Response, error)
}

// Defaults of a Reader.
const (
	DefaultQueryTimeout = 10 * time.Second
	DefaultConcurrency  = 8
)

// Reader reads PromQL queries from one Prometheus server.
type Reader struct {
	base *url.URL
	http Doer
	// QueryTimeout bounds each query (its value and its timestamp
	// together); DefaultQueryTimeout when zero.
	QueryTimeout time.Duration
	// Concurrency bounds the queries in flight; DefaultConcurrency when
	// zero.
	Concurrency int
}

var _ loop.MetricReader = (*Reader)(nil)

// New returns a reader of the Prometheus server at baseURL (for example
// http://127.0.0.1:9090). A nil client means http.DefaultClient's
// transport; each query is bounded by QueryTimeout.
func New(baseURL string, client Doer) (*Reader, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("prometheus base URL %q: want http(s)://host:port", baseURL)
	}
	if client == nil {
		client = &http.Client{}
	}
	return &Reader{base: u, http: client}, nil
}

// ReadMetrics evaluates each query at now, concurrently (at most
// Concurrency at once), each within its own QueryTimeout. A query's value
// is its result; its time is the newest sample's timestamp, found by
// evaluating timestamp(<q>). For a plain selector that is the scrape time
// of the sample; for an expression over functions Prometheus reports the
// evaluation time, and a series without a sample within Prometheus's
// lookback (5 min by default) has no result, so it is found missing. Every
// failure (a refused query, an HTTP 500, a timeout, a server that cannot
// be reached) is reported in its query's Sample: one failing query never
// fails the others, and the returned error is always nil.
func (r *Reader) ReadMetrics(ctx context.Context, queries []loop.MetricQuery, now time.Time) ([]loop.Sample, error) {
	samples := make([]loop.Sample, len(queries))
	conc := defaults.Positive(r.Concurrency, DefaultConcurrency)
	sem := make(chan struct{}, conc)
	var wg sync.WaitGroup
	for i, q := range queries {
		if q.Source != loop.SourcePrometheus {
			samples[i].Err = fmt.Errorf("prometheus reader: query source %q is not prometheus", q.Source)
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			samples[i] = r.readOne(ctx, q.PromQL, now)
		}()
	}
	wg.Wait()
	return samples, nil
}

// readOne reads one query within its timeout.
func (r *Reader) readOne(ctx context.Context, promql string, now time.Time) loop.Sample {
	timeout := defaults.Positive(r.QueryTimeout, DefaultQueryTimeout)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	s, err := r.read(ctx, promql, now)
	if err != nil {
		return loop.Sample{Err: err}
	}
	return s
}

func (r *Reader) read(ctx context.Context, promql string, now time.Time) (loop.Sample, error) {
	v, found, evalAt, err := r.instant(ctx, promql, now)
	if err != nil || !found {
		return loop.Sample{}, err
	}
	s := loop.Sample{Value: v, Time: evalAt, Found: true}
	ts, tsFound, _, err := r.instant(ctx, "timestamp("+promql+")", now)
	if err == nil && tsFound && !math.IsNaN(ts) {
		sec, frac := math.Modf(ts)
		s.Time = time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC()
	}
	// A scalar expression has no timestamp(); its evaluation time stands.
	return s, nil
}

// queryError is a query that Prometheus refused or whose result is not one
// series: the fault is the query's, not the server's.
type queryError struct {
	query, reason string
}

func (e *queryError) Error() string { return fmt.Sprintf("prometheus query %q: %s", e.query, e.reason) }

type apiResponse struct {
	Status    string `json:"status"`
	ErrorType string `json:"errorType"`
	Error     string `json:"error"`
	Data      struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	} `json:"data"`
}

// instant evaluates promql at now and returns its single value and the time
// Prometheus reports for it.
func (r *Reader) instant(ctx context.Context, promql string, now time.Time) (float64, bool, time.Time, error) {
	form := url.Values{}
	form.Set("query", promql)
	form.Set("time", strconv.FormatFloat(float64(now.UnixMilli())/1e3, 'f', 3, 64))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.base.String()+"/api/v1/query", strings.NewReader(form.Encode()))
	if err != nil {
		return 0, false, time.Time{}, fmt.Errorf("prometheus query %q: %w", promql, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := r.http.Do(req)
	if err != nil {
		return 0, false, time.Time{}, fmt.Errorf("prometheus query %q: %w", promql, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, false, time.Time{}, fmt.Errorf("prometheus query %q: read response: %w", promql, err)
	}
	var ar apiResponse
	if err := json.Unmarshal(body, &ar); err != nil {
		return 0, false, time.Time{}, fmt.Errorf("prometheus query %q: HTTP %d, undecodable body: %w", promql, resp.StatusCode, err)
	}
	if ar.Status != "success" {
		if resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusUnprocessableEntity {
			return 0, false, time.Time{}, &queryError{promql, ar.ErrorType + ": " + ar.Error}
		}
		return 0, false, time.Time{}, fmt.Errorf("prometheus query %q: HTTP %d: %s: %s", promql, resp.StatusCode, ar.ErrorType, ar.Error)
	}
	switch ar.Data.ResultType {
	case "scalar":
		var pair []json.RawMessage
		if err := json.Unmarshal(ar.Data.Result, &pair); err != nil {
			return 0, false, time.Time{}, &queryError{promql, "undecodable scalar result"}
		}
		v, at, err := decodePair(pair)
		if err != nil {
			return 0, false, time.Time{}, &queryError{promql, err.Error()}
		}
		return v, true, at, nil
	case "vector":
		var series []struct {
			Value []json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(ar.Data.Result, &series); err != nil {
			return 0, false, time.Time{}, &queryError{promql, "undecodable vector result"}
		}
		switch len(series) {
		case 0:
			return 0, false, time.Time{}, nil
		case 1:
			v, at, err := decodePair(series[0].Value)
			if err != nil {
				return 0, false, time.Time{}, &queryError{promql, err.Error()}
			}
			return v, true, at, nil
		default:
			return 0, false, time.Time{}, &queryError{promql, fmt.Sprintf("returns %d series; want one (aggregate it, e.g. max(...))", len(series))}
		}
	default:
		return 0, false, time.Time{}, &queryError{promql, fmt.Sprintf("result type %q; want a vector or a scalar", ar.Data.ResultType)}
	}
}

// decodePair decodes Prometheus's [<unix seconds>, "<value>"].
func decodePair(pair []json.RawMessage) (float64, time.Time, error) {
	if len(pair) != 2 {
		return 0, time.Time{}, fmt.Errorf("sample has %d fields; want 2", len(pair))
	}
	var ts float64
	if err := json.Unmarshal(pair[0], &ts); err != nil {
		return 0, time.Time{}, fmt.Errorf("sample timestamp: %w", err)
	}
	var vs string
	if err := json.Unmarshal(pair[1], &vs); err != nil {
		return 0, time.Time{}, fmt.Errorf("sample value: %w", err)
	}
	v, err := strconv.ParseFloat(vs, 64)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("sample value %q: %w", vs, err)
	}
	sec, frac := math.Modf(ts)
	return v, time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC(), nil
}
