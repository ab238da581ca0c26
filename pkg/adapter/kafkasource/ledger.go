package kafkasource

import "sort"

// ledger tracks the records of one partition that this member delivered in
// its current assignment and that the commit point has not passed yet.
//
// The commit point is the offset after the highest record of an unbroken
// run of settled records (stored or dead-lettered) starting at the first
// record delivered: a record that was delivered but is not settled holds the
// commit point back, whatever comes after it. Offsets in a partition are not
// contiguous (transaction markers, compaction), so the run is over delivered
// records, not over offset+1.
type ledger struct {
	open      []entry // delivered, in offset order, not yet passed
	last      int64   // highest offset delivered; -1 before the first
	point     int64   // commit point: offset to commit next; -1 when none
	epoch     int32   // leader epoch of the record before point
	committed int64   // last offset committed by this member; -1 when none
}

type entry struct {
	offset int64
	epoch  int32
	done   bool
}

func newLedger() *ledger { return &ledger{last: -1, point: -1, committed: -1} }

// deliver records that offset was handed out. It returns false for an offset
// at or below one already delivered (a refetch): the caller drops it.
func (l *ledger) deliver(offset int64, epoch int32) bool {
	if offset <= l.last {
		return false
	}
	l.last = offset
	l.open = append(l.open, entry{offset: offset, epoch: epoch})
	return true
}

// settle marks offset as stored (or dead-lettered) and moves the commit point
// over the settled prefix. It returns false when offset is not open (already
// settled, or never delivered in this assignment).
func (l *ledger) settle(offset int64) bool {
	i := sort.Search(len(l.open), func(i int) bool { return l.open[i].offset >= offset })
	if i == len(l.open) || l.open[i].offset != offset || l.open[i].done {
		return false
	}
	l.open[i].done = true
	n := 0
	for n < len(l.open) && l.open[n].done {
		l.point = l.open[n].offset + 1
		l.epoch = l.open[n].epoch
		n++
	}
	l.open = l.open[n:]
	return true
}

// due reports whether the commit point is ahead of the last commit.
func (l *ledger) due() bool { return l.point > l.committed }
