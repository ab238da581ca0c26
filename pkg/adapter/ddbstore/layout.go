package ddbstore

import (
	"sync"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// leaseMemory is what a Store remembers of the leases it wrote: the RATE
// it read last for each loop (its version picks the lease layout, its
// legacy_live completes the live count), and the live-count buckets each
// of its instances added itself to.
type leaseMemory struct {
	mu      sync.Mutex
	rates   map[string]protocol.Rate
	asked   map[string]bool // loops whose RATE the store read, or tried to
	buckets map[[2]string][]int64
}

// ask reports whether the store has not yet read, nor tried to read, the
// RATE of loopID, and notes that it now tries.
func (m *leaseMemory) ask(loopID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.asked[loopID] || m.rates[loopID].Loop != "" {
		return false
	}
	if m.asked == nil {
		m.asked = make(map[string]bool)
	}
	m.asked[loopID] = true
	return true
}

func (m *leaseMemory) saw(r protocol.Rate) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.rates == nil {
		m.rates = make(map[string]protocol.Rate)
	}
	m.rates[r.Loop] = protocol.Rate{Loop: r.Loop, Version: r.Version, LegacyLive: r.LegacyLive}
}

// rate is the version and legacy count of the RATE last read for loopID
// (version 1 when none was read).
func (m *leaseMemory) rate(loopID string) protocol.Rate {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.rates[loopID]
}

func (m *leaseMemory) counted(loopID, instance string, bucket int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.buckets[[2]string{loopID, instance}] {
		if b == bucket {
			return true
		}
	}
	return false
}

// count records that instance added itself to bucket's count; it keeps
// the last two buckets, the ones a live count reads.
func (m *leaseMemory) count(loopID, instance string, bucket int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.buckets == nil {
		m.buckets = make(map[[2]string][]int64)
	}
	k := [2]string{loopID, instance}
	bs := append(m.buckets[k], bucket)
	m.buckets[k] = bs[max(0, len(bs)-2):]
}

// forget returns the buckets instance added itself to and forgets them.
func (m *leaseMemory) forget(loopID, instance string) []int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := [2]string{loopID, instance}
	bs := m.buckets[k]
	delete(m.buckets, k)
	return bs
}
