// Package metrictest is the contract suite of metric.Reader: every reader
// (CloudWatch, Prometheus, the tests' fixed values, yours) runs it against
// its own backend, the way testing/slogtest checks a slog.Handler.
package metrictest

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/metric"
)

// Fixture is what the backend under test holds when Run starts.
type Fixture struct {
	// Present is a query whose newest datapoint in its lookback is Value,
	// stamped no later than Now.
	Present metric.Query
	Value   float64
	// Missing is a query of the reader's source with no datapoint in its
	// lookback.
	Missing metric.Query
	// Foreign is a query of a source the reader does not read; its zero
	// value skips that case (a reader that reads every query).
	Foreign metric.Query
	// Now is the time queries are read at; zero: time.Now().
	Now time.Time
}

// Run checks r against f: one Sample per query, in the queries' order; a
// present datapoint found with its value and a time not after now; a
// missing one not found and not an error; a foreign query failed in its own
// Sample, the others read; an empty batch read without error.
func Run(t *testing.T, r metric.Reader, f Fixture) {
	t.Helper()
	now := f.Now
	if now.IsZero() {
		now = time.Now()
	}
	ctx := context.Background()
	t.Run("OrderAndCount", func(t *testing.T) {
		qs := []metric.Query{f.Present, f.Missing, f.Present}
		got, err := r.ReadMetrics(ctx, qs, now)
		if err != nil {
			t.Fatalf("ReadMetrics(present, missing, present) = %v; want nil", err)
		}
		if len(got) != len(qs) {
			t.Fatalf("ReadMetrics(3 queries) returned %d samples; want 3", len(got))
		}
		for _, i := range []int{0, 2} {
			checkPresent(t, i, got[i], f.Value, now)
		}
		checkMissing(t, 1, got[1])
	})
	t.Run("Missing", func(t *testing.T) {
		got, err := r.ReadMetrics(ctx, []metric.Query{f.Missing}, now)
		if err != nil || len(got) != 1 {
			t.Fatalf("ReadMetrics(missing) = %d samples, %v; want 1, nil", len(got), err)
		}
		checkMissing(t, 0, got[0])
	})
	t.Run("Empty", func(t *testing.T) {
		got, err := r.ReadMetrics(ctx, nil, now)
		if err != nil || len(got) != 0 {
			t.Errorf("ReadMetrics(no queries) = %v, %v; want no samples, nil", got, err)
		}
	})
	if f.Foreign.Source == "" {
		return
	}
	t.Run("Foreign", func(t *testing.T) {
		got, err := r.ReadMetrics(ctx, []metric.Query{f.Foreign, f.Present}, now)
		if err != nil || len(got) != 2 {
			t.Fatalf("ReadMetrics(foreign, present) = %d samples, %v; want 2, nil (the foreign query fails alone)", len(got), err)
		}
		if got[0].Err == nil {
			t.Errorf("sample of a %s query = %+v; want its own error", f.Foreign.Source, got[0])
		}
		checkPresent(t, 1, got[1], f.Value, now)
	})
}

func checkPresent(t *testing.T, i int, s metric.Sample, want float64, now time.Time) {
	t.Helper()
	if s.Err != nil || !s.Found || s.Value != want {
		t.Errorf("sample %d (present) = %+v; want found, value %v, no error", i, s, want)
	}
	if s.Found && (s.Time.IsZero() || s.Time.After(now)) {
		t.Errorf("sample %d (present) time %v; want set and not after now %v", i, s.Time, now)
	}
}

func checkMissing(t *testing.T, i int, s metric.Sample) {
	t.Helper()
	if s.Err != nil || s.Found {
		t.Errorf("sample %d (missing) = %+v; want not found, no error", i, s)
	}
}
