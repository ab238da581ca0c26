package consume_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

func TestPacerFollowsRate(t *testing.T) {
	tests := []struct {
		name  string
		rate  float64
		batch int
		total int
	}{
		{"1/s batches of 1", 1, 1, 60},
		{"10/s batches of 10", 10, 10, 600},
		{"100/s batches of 10", 100, 10, 6000},
		{"1000/s batches of 10", 1000, 10, 60000},
		{"37.5/s batches of 7", 37.5, 7, 2254},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			p := consume.NewPacer(clk, tt.rate, tt.batch)
			start := clk.Now()
			for sent := 0; sent < tt.total; sent += tt.batch {
				if err := p.Wait(context.Background(), tt.batch); err != nil {
					t.Fatalf("Wait(%d) = %v", tt.batch, err)
				}
			}
			// The first burst goes at once; the rest follows the rate.
			got := clk.Now().Sub(start).Seconds()
			want := float64(tt.total-tt.batch) / tt.rate
			if math.Abs(got-want) > 1e-6*want+1e-9 {
				t.Errorf("%d messages at %v/s took %.6f s; want %.6f s", tt.total, tt.rate, got, want)
			}
		})
	}
}

func TestPacerUnlimitedAndPaused(t *testing.T) {
	clk := newFakeClock()
	p := consume.NewPacer(clk, math.Inf(1), 10)
	for range 1000 {
		if d, err := p.Delay(10); err != nil || d != 0 {
			t.Fatalf("unlimited Delay(10) = %v, %v; want 0, nil", d, err)
		}
	}
	p.SetRate(0)
	if _, err := p.Delay(1); !errors.Is(err, consume.ErrPaused) {
		t.Fatalf("Delay at rate 0 = %v; want ErrPaused", err)
	}
	p.SetRate(5)
	if got := p.Rate(); got != 5 {
		t.Fatalf("Rate() = %v; want 5", got)
	}
}

func TestPacerRateChangeTakesEffect(t *testing.T) {
	clk := newFakeClock()
	p := consume.NewPacer(clk, 10, 1)
	p.Wait(context.Background(), 1) // spend the burst
	d, _ := p.Delay(1)
	if d != 100*time.Millisecond {
		t.Fatalf("Delay at 10/s = %v; want 100ms", d)
	}
	clk.Advance(d)
	p.SetRate(100)
	d, _ = p.Delay(1)
	if d != 10*time.Millisecond {
		t.Fatalf("Delay after SetRate(100) = %v; want 10ms", d)
	}
}

func TestPacerWaitCancelledGivesTokensBack(t *testing.T) {
	clk := newFakeClock()
	p := consume.NewPacer(clk, 10, 10)
	p.Wait(context.Background(), 10) // spend the bucket
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Wait(ctx, 10); err == nil {
		t.Fatal("Wait on a cancelled context = nil; want an error")
	}
	// The cancelled reservation is returned: 10 more messages wait 1 s, not 2 s.
	if d, _ := p.Delay(10); d != time.Second {
		t.Errorf("Delay(10) after a cancelled Wait = %v; want 1s", d)
	}
}

// TestPacerWaitByNeverSleepsPastTheDeadline: WaitBy lets through the part of
// a batch whose slot comes by the deadline, sleeps only as long as that part
// needs, and returns at once with none when nothing fits or the rate is zero.
func TestPacerWaitByNeverSleepsPastTheDeadline(t *testing.T) {
	tests := []struct {
		name   string
		rate   float64
		n      int
		within time.Duration
		want   int
	}{
		{"all fit", 100, 10, 27 * time.Second, 10},
		{"trickle: part fits", 0.1, 10, 27 * time.Second, 3}, // 1 token + 2.7
		{"too slow for one more", 0.01, 10, 27 * time.Second, 1},
		{"unlimited", math.Inf(1), 10, time.Second, 10},
		{"deadline passed", 1, 10, -time.Second, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			p := consume.NewPacer(clk, tt.rate, 1) // one token in the bucket
			start := clk.Now()
			by := start.Add(tt.within)
			got, err := p.WaitBy(context.Background(), tt.n, by)
			if err != nil || got != tt.want {
				t.Fatalf("WaitBy(%d, +%v) at %v/s = %d, %v; want %d, nil", tt.n, tt.within, tt.rate, got, err, tt.want)
			}
			if end := clk.Now(); end.After(by) && end.After(start) {
				t.Errorf("slept until %v past the deadline", end.Sub(by))
			}
		})
	}
	clk := newFakeClock()
	p := consume.NewPacer(clk, 0, 10)
	if got, err := p.WaitBy(context.Background(), 10, clk.Now().Add(time.Hour)); got != 0 || !errors.Is(err, consume.ErrPaused) || clk.slept.Load() != 0 {
		t.Errorf("WaitBy at rate 0 = %d, %v after sleeping %v; want 0, ErrPaused at once", got, err, time.Duration(clk.slept.Load()))
	}
}

// TestPacerWaitByKeepsTheRate: what WaitBy lets through, batch after batch
// with a deadline each time, follows the rate.
func TestPacerWaitByKeepsTheRate(t *testing.T) {
	clk := newFakeClock()
	p := consume.NewPacer(clk, 0.5, 10)
	start, total := clk.Now(), 0
	for range 100 {
		n, err := p.WaitBy(context.Background(), 10, clk.Now().Add(25*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		total += n
		clk.Advance(5 * time.Second) // the rest of the invocation and the next one's start
	}
	if rate := float64(total-10) / clk.Now().Sub(start).Seconds(); rate > 0.5 {
		t.Errorf("let through %d in %v: %.3f/s; want <= 0.5/s", total, clk.Now().Sub(start), rate)
	}
}
