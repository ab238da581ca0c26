package memqueue

import (
	"context"
	"errors"
	"sync"

	"github.com/sluice-dev/sluice/pkg/consume"
)

var _ consume.Sink = (*Sink)(nil)

// ErrDown is the error of a Sink set down with SetDown.
var ErrDown = errors.New("memqueue sink is down")

// Sink stores messages in memory, keyed by id: storing an id twice keeps
// one copy and counts a redelivery. It can be set down (every Store fails,
// retryable) and given a Refuse function (per-message permanent refusal), and
// calls an optional OnStore hook (the demo's simulated plant counts load
// there). Safe for concurrent use.
type Sink struct {
	mu         sync.Mutex
	rows       map[string][]byte
	redelivers int
	down       bool
	// Refuse, when set, returns a non-empty reason for a message the
	// destination refuses for good.
	Refuse func(consume.Message) string
	// OnStore, when set, is called with the number of messages stored by
	// each successful Store.
	OnStore func(n int)
}

// NewSink returns an empty sink.
func NewSink() *Sink { return &Sink{rows: map[string][]byte{}} }

// SetDown makes every Store fail (true) or succeed again (false).
func (s *Sink) SetDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

// Store stores msgs idempotently by id.
func (s *Sink) Store(_ context.Context, msgs []consume.Message) ([]consume.Result, error) {
	s.mu.Lock()
	if s.down {
		s.mu.Unlock()
		return nil, ErrDown
	}
	res := make([]consume.Result, len(msgs))
	n := 0
	for i, m := range msgs {
		if s.Refuse != nil {
			if why := s.Refuse(m); why != "" {
				res[i] = consume.Result{Outcome: consume.Permanent, Reason: why}
				continue
			}
		}
		if _, dup := s.rows[m.ID]; dup {
			s.redelivers++
		} else {
			s.rows[m.ID] = append([]byte(nil), m.Body...)
		}
		n++
	}
	hook := s.OnStore
	s.mu.Unlock()
	if hook != nil && n > 0 {
		hook(n)
	}
	return res, nil
}

// Len returns the number of distinct messages stored.
func (s *Sink) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rows)
}

// Has reports whether id is stored.
func (s *Sink) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.rows[id]
	return ok
}

// Redelivered returns how many stores hit an id already stored.
func (s *Sink) Redelivered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.redelivers
}

var _ consume.Prober = (*Sink)(nil)

// Probe returns ErrDown while the sink is set down (consume.Prober).
func (s *Sink) Probe(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return ErrDown
	}
	return nil
}
