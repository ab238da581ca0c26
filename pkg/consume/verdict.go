package consume

import (
	"sync"

	"github.com/sluice-dev/sluice/internal/recent"
)

// verdictMemory bounds how many poison verdicts a Consumer remembers; past
// it the oldest are forgotten (a message then is judged anew, as without
// the memory).
const verdictMemory = 4096

// verdicts remembers the messages the consumer sent to the dead-letter
// path as poison while the window did not say the destination refused
// everything. Such a message comes back when the dead-letter queue
// refused it (KMS access denied, a deleted queue): once the healthy
// messages are stored, the queue's tail is mostly that poison, and judged
// as any it would read as a destination refusing everything, be held and
// come back to the same verdict for as long as the queue keeps it.
// Refused again, a remembered message is poison again, and not counted in
// the breaker's window. It is safe for concurrent use.
type verdicts struct {
	mu  sync.Mutex
	ids *recent.Map[string, struct{}] // nil until the first verdict
}

// add remembers the poison messages ps.
func (v *verdicts) add(ps []Poison) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, p := range ps {
		id := p.Message.ID
		if id == "" {
			continue
		}
		if v.ids == nil {
			v.ids = recent.New[string, struct{}](verdictMemory)
		}
		v.ids.Put(id, struct{}{})
	}
}

// known moves the remembered messages of ps to its front, keeping the
// order of each part, and returns how many there are.
func (v *verdicts) known(ps []Poison) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.ids == nil || v.ids.Len() == 0 {
		return 0
	}
	var fresh []Poison
	k := 0
	for _, p := range ps {
		if p.Message.ID != "" && v.ids.Has(p.Message.ID) {
			ps[k] = p
			k++
		} else {
			fresh = append(fresh, p)
		}
	}
	copy(ps[k:], fresh)
	return k
}
