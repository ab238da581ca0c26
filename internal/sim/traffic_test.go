package sim

import (
	"testing"
	"time"
)

func TestProducerRateAtAndBursts(t *testing.T) {
	s := Reference()
	s.ProducerRate = 100
	s.ProducerChanges = []ProducerChange{{At: 20 * time.Minute, Rate: 50}, {At: 10 * time.Minute, Rate: 300}}
	s.Bursts = []Burst{{At: time.Minute, N: 7}, {At: time.Minute, N: 3}, {At: 2 * time.Minute, N: 5}}
	for _, tc := range []struct {
		at   time.Duration
		want float64
	}{{0, 100}, {10*time.Minute - 1, 100}, {10 * time.Minute, 300}, {20 * time.Minute, 50}, {time.Hour, 50}} {
		if got := s.ProducerRateAt(tc.at); got != tc.want {
			t.Errorf("ProducerRateAt(%v) = %v; want %v", tc.at, got, tc.want)
		}
	}
	if got := s.BurstsIn(time.Minute, time.Minute+time.Second); got != 10 {
		t.Errorf("BurstsIn(1m, 1m1s) = %d; want 10", got)
	}
	if got := s.BurstsIn(0, time.Minute); got != 0 {
		t.Errorf("BurstsIn(0, 1m) = %d; want 0 (the end is excluded)", got)
	}
}

func TestRunCountsTraffic(t *testing.T) {
	s, err := Preset(PresetIdleBurst)
	if err != nil {
		t.Fatal(err)
	}
	s.Duration = 70 * time.Minute
	res, err := Run(s, PolicyFunc(func(Observation) float64 { return 2000 }))
	if err != nil {
		t.Fatal(err)
	}
	want := int64(400*70*60) + 300_000
	if res.Counts.Produced != want || res.Counts.Lost() != 0 {
		t.Fatalf("produced %d, lost %d; want %d produced (400 msg/s for 70 min plus the burst), none lost", res.Counts.Produced, res.Counts.Lost(), want)
	}
	// Before the burst the consumers take what the producers send.
	if p := res.Series.Processed[30*60]; p != 400 {
		t.Errorf("processed at 30 min = %v msg/s; want 400 (demand-limited)", p)
	}
	if p := res.Series.Processed[61*60]; p != 2000 {
		t.Errorf("processed at 61 min = %v msg/s; want 2000 (the burst, at the allowed rate)", p)
	}
}

func TestPresets(t *testing.T) {
	for _, name := range Presets() {
		s, err := Preset(name)
		if err != nil {
			t.Fatalf("Preset(%q): %v", name, err)
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("Preset(%q) does not validate: %v", name, err)
		}
	}
	d, _ := Preset(PresetDiurnal)
	capacity := (d.Setpoint - d.Plant.Base) / d.Plant.Gain
	crossings := 0
	for i := 1; i < len(d.ProducerChanges); i++ {
		if (d.ProducerChanges[i-1].Rate < capacity) != (d.ProducerChanges[i].Rate < capacity) {
			crossings++
		}
	}
	if crossings != 2 || len(d.Bursts) == 0 {
		t.Errorf("diurnal crosses the capacity %v msg/s %d times with %d bursts; want 2 crossings and a burst", capacity, crossings, len(d.Bursts))
	}
	if _, err := Preset("nope"); err == nil {
		t.Error(`Preset("nope"): no error`)
	}
}
