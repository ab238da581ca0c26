package defaults

import (
	"math"
	"testing"
	"time"
)

// check fails t unless Positive(v, d) is want.
func check[T Number](t *testing.T, v, d, want T) {
	t.Helper()
	if got := Positive(v, d); got != want {
		t.Errorf("Positive(%v, %v) = %v, want %v", v, d, got, want)
	}
}

func TestPositive(t *testing.T) {
	check(t, 0, 10, 10)
	check(t, -1, 10, 10)
	check(t, 3, 10, 3)
	check(t, int32(-7), 5, 5)
	check(t, time.Duration(0), 2*time.Second, 2*time.Second)
	check(t, -time.Nanosecond, 2*time.Second, 2*time.Second)
	check(t, time.Millisecond, 2*time.Second, time.Millisecond)
	check(t, 0.0, 1.5, 1.5)
	check(t, -0.5, 1.5, 1.5)
	check(t, 0.25, 1.5, 0.25)
	if got := Positive(math.NaN(), 1.5); !math.IsNaN(got) {
		t.Errorf("Positive(NaN, 1.5) = %v, want NaN (NaN is not <= 0)", got)
	}
}
