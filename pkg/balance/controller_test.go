package balance

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"
)

const tick = 15 * time.Second

func sumWeights(w map[string]float64) float64 {
	var s float64
	for _, v := range w {
		s += v
	}
	return s
}

func TestAllMetricsMissingHoldsWeights(t *testing.T) {
	c := Controller{Config: DefaultConfig()}
	c.Update(map[string]float64{"a": 80, "b": 40}, tick)
	want := c.Weights()
	c.Update(map[string]float64{"a": math.NaN(), "b": math.NaN()}, tick)
	if got := c.Weights(); !reflect.DeepEqual(got, want) {
		t.Errorf("weights with no metric = %v; want %v", got, want)
	}
}

func TestAbsurdMetricsKeepStateFinite(t *testing.T) {
	c := Controller{Config: DefaultConfig()}
	for _, u := range []map[string]float64{
		{"a": math.MaxFloat64, "b": math.MaxFloat64, "c": 5},
		{"a": 1e300, "b": 0, "c": 5},
		{"a": math.SmallestNonzeroFloat64, "b": 0, "c": 0},
	} {
		c.Update(u, tick)
		if _, err := json.Marshal(c.State); err != nil {
			t.Fatalf("after metrics %v: state does not marshal: %v", u, err)
		}
		if got := sumWeights(c.Weights()); math.Abs(got-1) > 1e-9 {
			t.Errorf("after metrics %v: weights sum to %v; want 1", u, got)
		}
	}
}

func TestIdleFleetHolds(t *testing.T) {
	c := Controller{Config: DefaultConfig()}
	c.Update(map[string]float64{"a": 0.5, "b": 0}, tick) // mean 0.25 < MinMean
	w := c.Weights()
	if w["a"] != 0.5 || w["b"] != 0.5 {
		t.Errorf("weights of an idle fleet = %v; want equal", w)
	}
}

func TestGainEditIsBumpless(t *testing.T) {
	// The same error at two ticks: the proportional increment is zero, so a
	// gain edit between them changes nothing but the integral step.
	u := map[string]float64{"a": 60, "b": 40, "c": 50}
	run := func(kp float64) map[string]float64 {
		c := Controller{Config: DefaultConfig()}
		c.Update(u, tick)
		c.Config.ProportionalGain = kp
		c.Update(u, tick)
		return c.Weights()
	}
	base, edited := run(DefaultConfig().ProportionalGain), run(10*DefaultConfig().ProportionalGain)
	for name := range base {
		if math.Abs(base[name]-edited[name]) > 1e-15 {
			t.Errorf("weight %s after a tenfold kp edit = %v; want %v (bumpless)", name, edited[name], base[name])
		}
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	tests := []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"kp 0", func(c *Config) { c.ProportionalGain = 0 }, true},
		{"kp negative", func(c *Config) { c.ProportionalGain = -1 }, false},
		{"ki 0", func(c *Config) { c.IntegralGain = 0 }, false},
		{"ki NaN", func(c *Config) { c.IntegralGain = math.NaN() }, false},
		{"min 0", func(c *Config) { c.MinShare = 0 }, false},
		{"min above 1", func(c *Config) { c.MinShare = 1.5 }, false},
		{"max below 1", func(c *Config) { c.MaxShare = 0.9 }, false},
		{"max Inf", func(c *Config) { c.MaxShare = math.Inf(1) }, false},
		{"min_mean negative", func(c *Config) { c.MinMean = -1 }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			if err := c.Validate(); (err == nil) != tt.ok {
				t.Errorf("Validate(%+v) = %v; want ok %v", c, err, tt.ok)
			}
		})
	}
}

// FuzzUpdate feeds arbitrary fleets, metrics (NaN, Inf, negative, huge),
// joins, leaves and intervals to Update: the weights stay finite, within
// their bounds, and sum to 1.
func FuzzUpdate(f *testing.F) {
	f.Add([]byte{3, 10, 200, 30, 1, 50, 100, 7})
	f.Add([]byte{9, 0, 0, 0, 0, 255, 255, 255, 255, 1, 2, 3})
	f.Add([]byte{2, 255, 0, 255, 0, 255, 0})
	f.Add([]byte{3, 15, 252, 255, 255, 255, 255, 255, 255, 239, 127, 252, 255, 255, 255, 255, 255, 255, 239, 127, 10})
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Controller{Config: DefaultConfig()}
		for len(data) >= 2 {
			n := int(data[0]%8) + 1
			dt := time.Duration(data[1]) * time.Second
			data = data[2:]
			u := make(map[string]float64, n)
			for i := 0; i < n; i++ {
				name := string(rune('a' + i))
				if len(data) == 0 {
					break
				}
				var y float64
				switch v := data[0]; {
				case v == 255:
					y = math.NaN()
				case v == 254:
					y = math.Inf(1)
				case v == 253:
					y = -1
				case v == 252 && len(data) >= 9:
					y = math.Float64frombits(binary.LittleEndian.Uint64(data[1:9]))
					data = data[8:]
				default:
					y = float64(v) / 2
				}
				data = data[1:]
				u[name] = y
			}
			c.Update(u, dt)
			w := c.Weights()
			if len(w) != len(u) {
				t.Fatalf("%d weights for %d nodes", len(w), len(u))
			}
			if len(w) == 0 {
				continue
			}
			lo, hi := c.bounds(len(w))
			var sum float64
			for name, v := range w {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < lo*(1-1e-9) || v > hi*(1+1e-9) {
					t.Fatalf("weight %s = %v; want finite in [%v, %v] (metrics %v)", name, v, lo, hi, u)
				}
				sum += v
			}
			if math.Abs(sum-1) > 1e-9 {
				t.Fatalf("weights %v sum to %v; want 1 (metrics %v)", w, sum, u)
			}
			if _, err := json.Marshal(c.State); err != nil {
				t.Fatalf("state does not marshal: %v", err)
			}
		}
	})
}

func BenchmarkUpdate(b *testing.B) {
	for _, n := range []int{3, 100} {
		u := make(map[string]float64, n)
		for i := 0; i < n; i++ {
			u[fmt.Sprintf("node-%03d", i)] = float64(20 + i%60)
		}
		b.Run(fmt.Sprintf("%d-nodes", n), func(b *testing.B) {
			c := Controller{Config: DefaultConfig()}
			for b.Loop() {
				c.Update(u, tick)
			}
		})
	}
}
