package defaults

import (
	"math"
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	for _, c := range []struct {
		name    string
		v, d, w int
	}{
		{"zero", 0, 10, 10},
		{"negative", -1, 10, 10},
		{"positive", 3, 10, 3},
	} {
		if got := Positive(c.v, c.d); got != c.w {
			t.Errorf("%s: Positive(%d, %d) = %d, want %d", c.name, c.v, c.d, got, c.w)
		}
	}
	if got := Positive(time.Duration(0), 2*time.Second); got != 2*time.Second {
		t.Errorf("Positive(0s, 2s) = %v, want 2s", got)
	}
	if got := Positive(-0.5, 1.5); got != 1.5 {
		t.Errorf("Positive(-0.5, 1.5) = %v, want 1.5", got)
	}
	if got := Positive(math.NaN(), 1.5); !math.IsNaN(got) {
		t.Errorf("Positive(NaN, 1.5) = %v, want NaN (NaN is not <= 0)", got)
	}
}
