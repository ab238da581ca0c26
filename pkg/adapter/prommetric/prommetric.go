// Package prommetric reads a loop's measurement from Prometheus through its
// HTTP API, with client_golang's API client: a PromQL expression that
// returns one series, and the timestamp of its newest sample, which decides
// staleness. Source holds a Prometheus query's PARAMS rules.
package prommetric

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// Defaults of a Reader.
const (
	DefaultQueryTimeout = 10 * time.Second
	DefaultConcurrency  = 8
)

// Reader reads PromQL queries from one Prometheus server.
type Reader struct {
	api promv1.API
	// QueryTimeout bounds each query (its value and its timestamp
	// together); DefaultQueryTimeout when zero.
	QueryTimeout time.Duration
	// Concurrency bounds the queries in flight; DefaultConcurrency when
	// zero.
	Concurrency int
}

var _ metric.Reader = (*Reader)(nil)

// New returns a reader of the Prometheus server at baseURL (for example
// http://127.0.0.1:9090). A nil client means one on http.DefaultTransport;
// each query is bounded by QueryTimeout.
func New(baseURL string, client *http.Client) (*Reader, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("prometheus base URL %q: want http(s)://host:port", baseURL)
	}
	cfg := api.Config{Address: u.String(), Client: client}
	if client == nil {
		cfg.Client = &http.Client{Transport: http.DefaultTransport}
	}
	c, err := api.NewClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("prometheus client for %q: %w", baseURL, err)
	}
	return &Reader{api: promv1.NewAPI(c)}, nil
}

// ReadMetrics evaluates each query at now, concurrently (at most
// Concurrency at once), each within its own QueryTimeout. A query's value
// is its result; its time is the newest sample's timestamp, found by
// evaluating timestamp(<q>). For a plain selector that is the scrape time
// of the sample; for an expression over functions Prometheus reports the
// evaluation time, and a series without a sample within Prometheus's
// lookback (5 min by default) has no result, so it is found missing. Every
// failure (a refused query, an HTTP 500, a timeout, a server that cannot
// be reached, a result of more than one series) is reported in its query's
// Sample: one failing query never fails the others, and the returned error
// is always nil.
func (r *Reader) ReadMetrics(ctx context.Context, queries []metric.Query, now time.Time) ([]metric.Sample, error) {
	samples := make([]metric.Sample, len(queries))
	sem := make(chan struct{}, defaults.Positive(r.Concurrency, DefaultConcurrency))
	var wg sync.WaitGroup
	for i, q := range queries {
		if q.Source != Name {
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

// readOne reads one query and its timestamp within the query's timeout. A
// scalar expression has no timestamp(): its evaluation time stands.
func (r *Reader) readOne(ctx context.Context, promql string, now time.Time) metric.Sample {
	ctx, cancel := context.WithTimeout(ctx, defaults.Positive(r.QueryTimeout, DefaultQueryTimeout))
	defer cancel()
	v, at, found, err := r.instant(ctx, promql, now)
	if err != nil || !found {
		return metric.Sample{Err: err}
	}
	s := metric.Sample{Value: v, Time: at, Found: true}
	if ts, _, ok, err := r.instant(ctx, "timestamp("+promql+")", now); err == nil && ok && !math.IsNaN(ts) {
		sec, frac := math.Modf(ts)
		s.Time = time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC()
	}
	return s
}

// instant evaluates promql at now: its single value and the time Prometheus
// reports for it; found is false when it returns no series.
func (r *Reader) instant(ctx context.Context, promql string, now time.Time) (v float64, at time.Time, found bool, err error) {
	res, _, _, err := r.api.Query(ctx, promql, now)
	if err != nil {
		return 0, at, false, fmt.Errorf("prometheus query %q: %w", promql, err)
	}
	switch x := res.(type) {
	case *model.Scalar:
		return float64(x.Value), x.Timestamp.Time().UTC(), true, nil
	case model.Vector:
		switch len(x) {
		case 0:
			return 0, at, false, nil
		case 1:
			return float64(x[0].Value), x[0].Timestamp.Time().UTC(), true, nil
		}
		return 0, at, false, fmt.Errorf("prometheus query %q: returns %d series; want one (aggregate it, e.g. max(...))", promql, len(x))
	default:
		return 0, at, false, fmt.Errorf("prometheus query %q: result type %q; want a vector or a scalar", promql, res.Type())
	}
}
