package wrr

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
)

func picks(p *Picker, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(p.Pick())
	}
	return b.String()
}

func TestPickerSequence(t *testing.T) {
	tests := []struct {
		weights map[string]float64
		want    string
	}{
		// nginx's own example (ngx_http_upstream_round_robin.c).
		{map[string]float64{"a": 5, "b": 1, "c": 1}, "aabacaa" + "aabacaa"},
		{map[string]float64{"a": 1, "b": 1, "c": 1}, "abcabc"},
		{map[string]float64{"a": 1, "b": 2}, "babbab"},
		{map[string]float64{"a": 0.5, "b": 0.25, "c": 0.25}, "abcaabca"},
		{map[string]float64{"a": 1, "b": 0}, "aaaa"},
	}
	for _, tt := range tests {
		p, err := NewPicker(tt.weights)
		if err != nil {
			t.Fatal(err)
		}
		if got := picks(p, len(tt.want)); got != tt.want {
			t.Errorf("picks with weights %v = %s; want %s", tt.weights, got, tt.want)
		}
	}
}

func TestPickerLongRunShares(t *testing.T) {
	weights := map[string]float64{"a": 1.0 / 6, "b": 2.0 / 6, "c": 3.0 / 6, "d": 0.013}
	p, err := NewPicker(weights)
	if err != nil {
		t.Fatal(err)
	}
	const n = 100_000
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		counts[p.Pick()]++
	}
	sum := 1.013
	for name, w := range weights {
		// Smooth WRR is exact over a full cycle and off by at most about
		// one pick in between.
		if got, want := float64(counts[name]), n*w/sum; math.Abs(got-want) > 2 {
			t.Errorf("picks of %s = %v; want %.1f", name, got, want)
		}
	}
}

func TestPickerSetWeightsAtRuntime(t *testing.T) {
	p, err := NewPicker(map[string]float64{"a": 1, "b": 1})
	if err != nil {
		t.Fatal(err)
	}
	picks(p, 3)
	if err := p.SetWeights(map[string]float64{"a": 3, "b": 1}); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for i := 0; i < 4000; i++ {
		counts[p.Pick()]++
	}
	if counts["a"] < 2998 || counts["a"] > 3002 {
		t.Errorf("picks of a after reweighting to 3:1 = %d of 4000; want 3000", counts["a"])
	}
	// A node joins: it gets its share from the next cycle on.
	if err := p.SetWeights(map[string]float64{"a": 1, "b": 1, "c": 2}); err != nil {
		t.Fatal(err)
	}
	if got := picks(p, 4); strings.Count(got, "c") != 2 {
		t.Errorf("picks after c joined with half the weight = %s; want two c", got)
	}
	if w := p.Weights(); math.Abs(w["c"]-0.5) > 1e-6 {
		t.Errorf("Weights()[c] = %v; want 0.5", w["c"])
	}
}

func TestPickerRejectsBadWeights(t *testing.T) {
	for _, w := range []map[string]float64{
		nil,
		{"a": 0},
		{"a": -1, "b": 2},
		{"a": math.NaN()},
		{"a": math.Inf(1)},
	} {
		if _, err := NewPicker(w); err == nil {
			t.Errorf("NewPicker(%v) = nil error; want an error", w)
		}
	}
	p, _ := NewPicker(map[string]float64{"a": 1, "b": 1})
	if err := p.SetWeights(map[string]float64{"a": math.NaN()}); err == nil {
		t.Error("SetWeights(NaN) = nil error; want an error")
	}
	if got := picks(p, 2); got != "ab" {
		t.Errorf("picks after a refused update = %s; want the old weights (ab)", got)
	}
}

func TestPickerConcurrent(t *testing.T) {
	p, _ := NewPicker(map[string]float64{"a": 1, "b": 3})
	var wg sync.WaitGroup
	var mu sync.Mutex
	counts := map[string]int{}
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := map[string]int{}
			for i := 0; i < 1000; i++ {
				local[p.Pick()]++
			}
			mu.Lock()
			for k, v := range local {
				counts[k] += v
			}
			mu.Unlock()
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 100; i++ {
			_ = p.SetWeights(map[string]float64{"a": 1, "b": 3})
		}
	}()
	wg.Wait()
	if counts["a"] != 1000 || counts["b"] != 3000 {
		t.Errorf("concurrent picks = %v; want a 1000, b 3000", counts)
	}
}

func BenchmarkPick(b *testing.B) {
	for _, n := range []int{3, 30} {
		w := map[string]float64{}
		for i := 0; i < n; i++ {
			w[string(rune('A'+i))] = float64(i + 1)
		}
		p, _ := NewPicker(w)
		b.Run(fmt.Sprintf("%d-nodes", n), func(b *testing.B) {
			for b.Loop() {
				p.Pick()
			}
		})
	}
}

// FuzzPicker checks smooth WRR's promise for any weights: over any number of
// picks, every node's count stays within the number of nodes of its share.
func FuzzPicker(f *testing.F) {
	f.Add([]byte{5, 1, 1}, uint16(700))
	f.Add([]byte{1, 0, 255, 3}, uint16(1000))
	f.Fuzz(func(t *testing.T, raw []byte, n uint16) {
		if len(raw) == 0 || len(raw) > 16 {
			return
		}
		weights := map[string]float64{}
		for i, b := range raw {
			weights[string(rune('a'+i))] = float64(b)
		}
		p, err := NewPicker(weights)
		if err != nil {
			return // all zero: refused, as it should be
		}
		shares := p.Weights()
		counts := map[string]int{}
		for k := 1; k <= int(n); k++ {
			counts[p.Pick()]++
			for name, w := range shares {
				if d := math.Abs(float64(counts[name]) - float64(k)*w); d > float64(len(raw)) {
					t.Fatalf("weights %v after %d picks: %s picked %d times; want %.1f +- %d",
						raw, k, name, counts[name], float64(k)*w, len(raw))
				}
			}
		}
	})
}
