package consumers_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
)

func TestSeq(t *testing.T) {
	bodies := map[string]int{consumers.Body(42, false): 42, consumers.Body(7, true): 7, `{"seq":3,"reject":true}`: 3}
	for body, want := range bodies {
		if got, ok := consumers.Seq([]byte(body)); !ok || got != want {
			t.Errorf("Seq(%q) = %d, %v; want %d, true", body, got, ok, want)
		}
	}
	if got, ok := consumers.Seq([]byte(`{"order":"o-1"}`)); ok {
		t.Errorf("Seq of a body without seq = %d, true; want false", got)
	}
}
