package kafkasource

import "testing"

func TestLedgerCommitPoint(t *testing.T) {
	tests := []struct {
		name      string
		delivered []int64
		settled   []int64
		want      int64 // commit point, -1 for none
	}{
		{"nothing settled", []int64{0, 1, 2}, nil, -1},
		{"all settled in order", []int64{0, 1, 2}, []int64{0, 1, 2}, 3},
		{"all settled out of order", []int64{0, 1, 2}, []int64{2, 0, 1}, 3},
		{"gap holds the point back", []int64{0, 1, 2, 3}, []int64{0, 2, 3}, 1},
		{"first unsettled holds everything", []int64{5, 6, 7}, []int64{6, 7}, -1},
		{"sparse offsets (txn markers, compaction)", []int64{10, 12, 15}, []int64{10, 12, 15}, 16},
		{"sparse offsets with gap", []int64{10, 12, 15}, []int64{10, 15}, 11},
		{"settle of undelivered ignored", []int64{0, 1}, []int64{0, 7}, 1},
		{"settle twice is harmless", []int64{0, 1, 2}, []int64{0, 0, 1}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger()
			for _, o := range tt.delivered {
				if !l.deliver(o, 1) {
					t.Fatalf("deliver(%d) = false; want true", o)
				}
			}
			for _, o := range tt.settled {
				l.settle(o)
			}
			if l.point != tt.want {
				t.Errorf("commit point after delivering %v and settling %v = %d; want %d", tt.delivered, tt.settled, l.point, tt.want)
			}
			if got, want := l.due(), tt.want >= 0; got != want {
				t.Errorf("due() = %v; want %v", got, want)
			}
		})
	}
}

func TestLedgerRejectsRefetch(t *testing.T) {
	l := newLedger()
	for _, o := range []int64{3, 4} {
		l.deliver(o, 0)
	}
	for _, o := range []int64{2, 3, 4} {
		if l.deliver(o, 0) {
			t.Errorf("deliver(%d) after delivering up to 4 = true; want false", o)
		}
	}
	if !l.deliver(5, 0) {
		t.Errorf("deliver(5) = false; want true")
	}
}

func TestLedgerSettleReportsUnknown(t *testing.T) {
	l := newLedger()
	l.deliver(1, 0)
	if !l.settle(1) {
		t.Errorf("settle(1) of a delivered offset = false; want true")
	}
	if l.settle(1) {
		t.Errorf("settle(1) again = true; want false")
	}
	if l.settle(9) {
		t.Errorf("settle(9) of an undelivered offset = true; want false")
	}
	l.committed = l.point
	if l.due() {
		t.Errorf("due() after committing the point = true; want false")
	}
}

// FuzzLedger drives a ledger with deliveries (increasing, sparse offsets) and
// settlements in any order, and checks the commit invariant after each step:
// every delivered offset below the commit point is settled, and the point
// never moves back.
func FuzzLedger(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 0x80, 0x82, 0x81, 0x83})
	f.Add([]byte{5, 5, 5, 0x81, 0x80, 0x82})
	f.Fuzz(func(t *testing.T, ops []byte) {
		l := newLedger()
		var delivered []int64
		settled := map[int64]bool{}
		next := int64(0)
		prev := int64(-1)
		for _, op := range ops {
			if op&0x80 == 0 { // deliver, skipping op%4 offsets (markers, compaction)
				next += int64(op % 4)
				l.deliver(next, 0)
				delivered = append(delivered, next)
				next++
			} else if len(delivered) > 0 { // settle the (op%len)-th delivered
				o := delivered[int(op&0x7f)%len(delivered)]
				l.settle(o)
				settled[o] = true
			}
			if l.point < prev {
				t.Fatalf("commit point moved back from %d to %d", prev, l.point)
			}
			prev = l.point
			for _, o := range delivered {
				if o < l.point && !settled[o] {
					t.Fatalf("commit point %d passes unsettled offset %d (ops %v)", l.point, o, ops)
				}
			}
			// The point is as far as it may go: the first unsettled delivered
			// offset (or past the last delivered when all are settled).
			want := int64(-1)
			for _, o := range delivered {
				if !settled[o] {
					break
				}
				want = o + 1
			}
			if l.point != want {
				t.Fatalf("commit point = %d; want %d (delivered %v, settled %v)", l.point, want, delivered, settled)
			}
		}
	})
}
