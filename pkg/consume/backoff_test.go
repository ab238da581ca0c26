package consume_test

import (
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

func TestBackoffCeilingGrowsAndCaps(t *testing.T) {
	b := consume.Backoff{Base: 100 * time.Millisecond, Max: time.Second}
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := b.Ceiling(i + 1); got != w*time.Millisecond {
			t.Errorf("Ceiling(%d) = %v; want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := b.Ceiling(500); got != time.Second {
		t.Errorf("Ceiling(500) = %v; want the cap 1s (no overflow)", got)
	}
}

func TestBackoffDelayWithinCeiling(t *testing.T) {
	b := consume.Backoff{Base: 10 * time.Millisecond, Max: 200 * time.Millisecond}
	for n := 1; n < 12; n++ {
		for range 50 {
			if d := b.Delay(n); d < 0 || d >= b.Ceiling(n) {
				t.Fatalf("Delay(%d) = %v; want in [0, %v)", n, d, b.Ceiling(n))
			}
			if d := b.EqualJitter(n); d < b.Ceiling(n)/2 || d > b.Ceiling(n) {
				t.Fatalf("EqualJitter(%d) = %v; want in [%v, %v]", n, d, b.Ceiling(n)/2, b.Ceiling(n))
			}
		}
	}
}
