package httpsink_test

import (
	"testing"

	"github.com/sluice-dev/sluice/pkg/adapter/httpsink"
)

func TestBalancedFollowsRateWeights(t *testing.T) {
	one, weights, err := httpsink.Balanced([]string{"http://a/"})
	if err != nil || weights != nil {
		t.Fatalf("httpsink.Balanced(one endpoint) = %T, weights set %v, %v; want round-robin without weights", one, weights != nil, err)
	}
	if _, ok := one.(*httpsink.RoundRobin); !ok {
		t.Errorf("httpsink.Balanced(one endpoint) = %T; want *httpsink.RoundRobin", one)
	}

	eps := []string{"http://a/", "http://b/", "http://c/"}
	p, weights, err := httpsink.Balanced(eps)
	if err != nil || weights == nil {
		t.Fatalf("httpsink.Balanced(three endpoints) = %T, weights set %v, %v", p, weights != nil, err)
	}
	picks := func() map[string]int {
		n := map[string]int{}
		for range 600 {
			n[p.Pick()]++
		}
		return n
	}
	if got := picks(); got["http://a/"] != 200 || got["http://b/"] != 200 || got["http://c/"] != 200 {
		t.Errorf("picks before any RATE = %v; want 200 each (equal)", got)
	}
	weights(map[string]float64{"http://a/": 1.0 / 6, "http://b/": 2.0 / 6, "http://c/": 3.0 / 6})
	if got := picks(); got["http://a/"] != 100 || got["http://b/"] != 200 || got["http://c/"] != 300 {
		t.Errorf("picks with RATE weights 1:2:3 = %v; want 100, 200, 300", got)
	}
	weights(nil) // RATE without weights, or fallen back to the safe rate
	if got := picks(); got["http://a/"] != 200 || got["http://c/"] != 200 {
		t.Errorf("picks after RATE lost its weights = %v; want 200 each", got)
	}
}
