package ddbhistory

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// Memory is an in-memory history for the demo and tests. It keeps at most
// Capacity points per loop (the oldest are dropped first), which plays the
// role of the DynamoDB items' TTL. It is safe for concurrent use.
type Memory struct {
	capacity int

	mu     sync.Mutex
	points map[string][]history.Point
}

// NewMemory returns an empty history that keeps at most capacity points per
// loop (capacity <= 0 means 4320, three days of one-minute ticks).
func NewMemory(capacity int) *Memory {
	capacity = defaults.Positive(capacity, 3*24*60)
	return &Memory{capacity: capacity, points: make(map[string][]history.Point)}
}

// Append adds p to the loop's history. A point whose time equals an existing
// one's replaces it (like a DynamoDB put on the same key).
func (m *Memory) Append(_ context.Context, loopID string, p history.Point) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.points[loopID]
	k := key(p.T)
	i := sort.Search(len(ps), func(i int) bool { return key(ps[i].T) >= k })
	switch {
	case i < len(ps) && key(ps[i].T) == k:
		ps[i] = p
	default:
		ps = append(ps, history.Point{})
		copy(ps[i+1:], ps[i:])
		ps[i] = p
	}
	if len(ps) > m.capacity {
		ps = append(ps[:0:0], ps[len(ps)-m.capacity:]...)
	}
	m.points[loopID] = ps
	return nil
}

// Last returns the newest n points of the loop, oldest first.
func (m *Memory) Last(_ context.Context, loopID string, n int) ([]history.Point, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.points[loopID]
	if n > 0 && len(ps) > n {
		ps = ps[len(ps)-n:]
	}
	return append([]history.Point(nil), ps...), nil
}

// Since returns at most n points after t (exclusive), oldest first.
func (m *Memory) Since(_ context.Context, loopID string, t time.Time, n int) ([]history.Point, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ps := m.points[loopID]
	k := key(t)
	i := sort.Search(len(ps), func(i int) bool { return key(ps[i].T) > k })
	ps = ps[i:]
	if n > 0 && len(ps) > n {
		ps = ps[:n]
	}
	return append([]history.Point(nil), ps...), nil
}

// key is the time resolution of history keys: milliseconds.
func key(t time.Time) int64 { return t.UnixMilli() }

// AppendReports appends the points of one controller tick at t, one per loop
// whose tick was applied.
func (m *Memory) AppendReports(ctx context.Context, t time.Time, reports []loop.Report) error {
	for _, r := range reports {
		if p, ok := history.FromReport(t, r); ok {
			if err := m.Append(ctx, r.Loop, p); err != nil {
				return err
			}
		}
	}
	return nil
}
