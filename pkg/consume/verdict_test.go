package consume

import (
	"fmt"
	"testing"
)

// The memory of poison verdicts is bounded: past verdictMemory the oldest
// are forgotten, and judged anew when they come back.
func TestVerdictsForgetTheOldest(t *testing.T) {
	var v verdicts
	for i := range verdictMemory + 10 {
		v.add([]Poison{{Message: Message{ID: fmt.Sprint(i)}}})
	}
	if v.ids.Len() != verdictMemory {
		t.Fatalf("remembered %d ids; want %d", v.ids.Len(), verdictMemory)
	}
	ps := []Poison{{Message: Message{ID: "0"}}, {Message: Message{ID: "9"}}, {Message: Message{ID: "10"}}, {Message: Message{ID: "new"}}, {Message: Message{ID: fmt.Sprint(verdictMemory + 9)}}}
	if k := v.known(ps); k != 2 || ps[0].Message.ID != "10" || ps[1].Message.ID != fmt.Sprint(verdictMemory+9) ||
		ps[2].Message.ID != "0" || ps[3].Message.ID != "9" || ps[4].Message.ID != "new" {
		t.Errorf("known: %d, order %v; want 2 (10 and %d, the newest) first, then the rest in order", k, ps, verdictMemory+9)
	}
}
