package consumers_test

import (
	"testing"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
)

func TestSeq(t *testing.T) {
	for _, tt := range []struct {
		body string
		want int
		ok   bool
	}{
		{consumers.Body(42, false), 42, true},
		{consumers.Body(7, true), 7, true},
		{`{"seq":3,"reject":true}`, 3, true},
		{`{"order":"o-1"}`, 0, false},
	} {
		if got, ok := consumers.Seq([]byte(tt.body)); got != tt.want || ok != tt.ok {
			t.Errorf("Seq(%q) = %d, %v; want %d, %v", tt.body, got, ok, tt.want, tt.ok)
		}
	}
}
