package consume

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Pacer spaces one consumer's batches so that the messages it lets through
// follow a rate (its share of the loop's allowed rate). It is a token bucket
// (golang.org/x/time/rate) driven by an injected Clock, with explicit times,
// so that the demo can run it in accelerated time and tests on a fake clock.
// It is safe for concurrent use.
type Pacer struct {
	clock Clock
	mu    sync.Mutex
	lim   *rate.Limiter
}

// NewPacer returns a Pacer at perSecond messages/s (math.Inf(1) for no
// limit) whose bucket holds burst messages: the largest batch that may go
// without waiting after an idle period. Keep burst near the batch size: a
// large burst lets a consumer run ahead of the rate after a pause.
func NewPacer(clock Clock, perSecond float64, burst int) *Pacer {
	if burst < 1 {
		burst = 1
	}
	return &Pacer{clock: clock, lim: rate.NewLimiter(limit(perSecond), burst)}
}

func limit(perSecond float64) rate.Limit {
	if math.IsInf(perSecond, 1) || perSecond >= float64(rate.Inf) {
		return rate.Inf
	}
	if perSecond <= 0 || math.IsNaN(perSecond) {
		return 0
	}
	return rate.Limit(perSecond)
}

// SetRate changes the rate from now on. Tokens already earned are kept.
func (p *Pacer) SetRate(perSecond float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lim.SetLimitAt(p.clock.Now(), limit(perSecond))
}

// SetBurst sets how many messages the bucket holds (at least 1).
func (p *Pacer) SetBurst(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lim.SetBurstAt(p.clock.Now(), max(n, 1))
}

// Burst returns how many messages the bucket holds.
func (p *Pacer) Burst() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lim.Burst()
}

// Rate returns the current rate in messages/s (+Inf when unlimited).
func (p *Pacer) Rate() float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.lim.Limit()
	if l == rate.Inf {
		return math.Inf(1)
	}
	return float64(l)
}

// Delay reserves n messages now and returns how long the caller must wait
// before letting them through. It returns ErrPaused when the rate is zero.
func (p *Pacer) Delay(n int) (time.Duration, error) {
	_, d, err := p.reserve(n)
	return d, err
}

func (p *Pacer) reserve(n int) (*rate.Reservation, time.Duration, error) {
	if n <= 0 {
		return nil, 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if p.lim.Limit() == 0 {
		return nil, 0, ErrPaused
	}
	if n > p.lim.Burst() {
		p.lim.SetBurstAt(now, n)
	}
	r := p.lim.ReserveN(now, n)
	if !r.OK() {
		return nil, 0, fmt.Errorf("reserve %d messages at %v/s: %w", n, p.lim.Limit(), ErrPaused)
	}
	return r, r.DelayFrom(now), nil
}

// Wait blocks until n messages may go, or ctx ends; then the reservation is
// given back, so that a batch released at shutdown or at a Lambda's deadline
// does not spend the rate.
func (p *Pacer) Wait(ctx context.Context, n int) error {
	r, d, err := p.reserve(n)
	if err != nil || d <= 0 {
		return err
	}
	if err := p.clock.Sleep(ctx, d); err != nil {
		p.cancel(r)
		return err
	}
	return nil
}

// WaitBy lets through as many of n messages as have a pacing slot by the
// time by: it reserves the largest k <= n whose slot comes by then, sleeps
// until that slot and returns k. It never sleeps past by, and returns 0 at
// once when not even one message fits (0 and ErrPaused when the rate is
// zero). A Lambda uses it to store the part of its batch that fits before
// its deadline and hand the rest back at once, instead of sleeping into the
// deadline.
func (p *Pacer) WaitBy(ctx context.Context, n int, by time.Time) (int, error) {
	k, _, err := p.waitSlice(ctx, n, by, time.Duration(math.MaxInt64))
	return k, err
}

// waitSlice is WaitBy that sleeps at most slice: when the slot of the k
// messages that fit by the time by is further away, it gives the
// reservation back, sleeps slice and returns done false, so that the caller
// re-reads the rate (which may have changed meanwhile) and asks again.
func (p *Pacer) waitSlice(ctx context.Context, n int, by time.Time, slice time.Duration) (k int, done bool, err error) {
	r, k, d, err := p.reserveBy(n, by)
	if err != nil || k == 0 || d <= 0 {
		return k, true, err
	}
	sleep := min(d, slice)
	if d > slice {
		p.cancel(r)
	}
	if err := p.clock.Sleep(ctx, sleep); err != nil {
		if d <= slice {
			p.cancel(r)
		}
		return 0, true, err
	}
	return k, d <= slice, nil
}

// cancel gives a reservation back.
func (p *Pacer) cancel(r *rate.Reservation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r.CancelAt(p.clock.Now())
}

// reserveBy reserves the largest k <= n whose slot comes by the time by.
func (p *Pacer) reserveBy(n int, by time.Time) (*rate.Reservation, int, time.Duration, error) {
	if n <= 0 {
		return nil, 0, 0, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	l := p.lim.Limit()
	switch {
	case l == 0:
		return nil, 0, 0, ErrPaused
	case l == rate.Inf:
		return nil, n, 0, nil
	}
	avail := max(by.Sub(now), 0).Seconds()
	k := min(n, int(math.Floor(p.lim.TokensAt(now)+float64(l)*avail+1e-9)))
	if k <= 0 {
		return nil, 0, 0, nil
	}
	if k > p.lim.Burst() {
		p.lim.SetBurstAt(now, k)
	}
	r := p.lim.ReserveN(now, k)
	if !r.OK() {
		return nil, 0, 0, fmt.Errorf("reserve %d messages at %v/s: %w", k, l, ErrPaused)
	}
	return r, k, r.DelayFrom(now), nil
}
