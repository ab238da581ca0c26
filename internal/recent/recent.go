// Package recent remembers the most recent keys put in it, up to a bound.
package recent

// Map maps the most recently put keys to values, at most its capacity of
// them: once it is full, putting a new key forgets the oldest. A key's age
// is that of its first Put; putting it again replaces its value and keeps
// its age. Make one with New (the zero Map has no room). A Map is not
// safe for concurrent use.
type Map[K comparable, V any] struct {
	vals map[K]V
	ring []K // the keys, oldest at next once full
	next int
	cap  int
}

// New returns an empty Map that remembers up to capacity keys. It panics
// if capacity is not positive.
func New[K comparable, V any](capacity int) *Map[K, V] {
	if capacity <= 0 {
		panic("recent: capacity must be positive")
	}
	return &Map[K, V]{vals: make(map[K]V), cap: capacity}
}

// Len returns how many keys m remembers.
func (m *Map[K, V]) Len() int { return len(m.vals) }

// Has reports whether m remembers k.
func (m *Map[K, V]) Has(k K) bool {
	_, ok := m.vals[k]
	return ok
}

// Get returns the value of k and whether m remembers k.
func (m *Map[K, V]) Get(k K) (V, bool) {
	v, ok := m.vals[k]
	return v, ok
}

// Put sets the value of k. A key m does not remember yet is the newest;
// when m is full, the oldest is forgotten to make room for it.
func (m *Map[K, V]) Put(k K, v V) {
	if _, ok := m.vals[k]; !ok {
		if len(m.ring) < m.cap {
			m.ring = append(m.ring, k)
		} else {
			delete(m.vals, m.ring[m.next])
			m.ring[m.next] = k
			m.next = (m.next + 1) % m.cap
		}
	}
	m.vals[k] = v
}
