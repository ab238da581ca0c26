package wrr_test

import (
	"math"
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/pkg/wrr"
)

func TestSpread(t *testing.T) {
	nodes := []string{"http://a/", "http://b/", "http://c/"}
	for _, tt := range []struct {
		name string
		w    map[string]float64
		want map[string]float64
	}{
		{"no weights: equal", nil, map[string]float64{"http://a/": 1, "http://b/": 1, "http://c/": 1}},
		{"weights of other nodes: equal", map[string]float64{"http://x/": 1}, map[string]float64{"http://a/": 1, "http://b/": 1, "http://c/": 1}},
		{"all named", map[string]float64{"http://a/": 0.2, "http://b/": 0.3, "http://c/": 0.5},
			map[string]float64{"http://a/": 0.2, "http://b/": 0.3, "http://c/": 0.5}},
		{"one missing gets the mean", map[string]float64{"http://a/": 0.2, "http://b/": 0.6, "http://z/": 0.2},
			map[string]float64{"http://a/": 0.2, "http://b/": 0.6, "http://c/": 0.4}},
		{"unusable weights are missing", map[string]float64{"http://a/": math.NaN(), "http://b/": -1, "http://c/": 0.5},
			map[string]float64{"http://a/": 0.5, "http://b/": 0.5, "http://c/": 0.5}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := wrr.Spread(nodes, tt.w)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Spread(%v) = %v; want %v", tt.w, got, tt.want)
			}
			if _, err := wrr.NewPicker(got); err != nil {
				t.Errorf("NewPicker(Spread(%v)): %v", tt.w, err)
			}
		})
	}
}

func TestFollow(t *testing.T) {
	nodes := []string{"http://a/", "http://b/"}
	p, follow, err := wrr.Follow(nodes)
	if err != nil {
		t.Fatalf("Follow: %v", err)
	}
	if got := p.Weights(); got["http://a/"] != 0.5 || got["http://b/"] != 0.5 {
		t.Errorf("initial weights = %v; want equal", got)
	}
	follow(map[string]float64{"http://a/": 0.25, "http://b/": 0.75})
	counts := map[string]int{}
	for range 400 {
		counts[p.Pick()]++
	}
	if counts["http://a/"] != 100 || counts["http://b/"] != 300 {
		t.Errorf("picks after follow(0.25, 0.75) = %v; want 100 and 300 of 400", counts)
	}
	follow(nil)
	if got := p.Weights(); got["http://a/"] != 0.5 {
		t.Errorf("weights after follow(nil) = %v; want equal", got)
	}
	if _, _, err := wrr.Follow(nil); err == nil {
		t.Errorf("Follow(no nodes) = nil error; want one")
	}
}
