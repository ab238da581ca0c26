package consume

import (
	"context"
	"errors"
	"math"
	"time"
)

// Limiter paces a consumer loop of your own by a Sluice loop's allowed rate,
// the way golang.org/x/time/rate's Limiter.WaitN paces by a fixed one:
// Wait(ctx, n) reads the loop's RATE (cached, at most once per rate period),
// sets the pace to this instance's share of it and the burst to one batch,
// and waits until n messages may go. While the loop is paused (an allowed
// rate of 0) Wait keeps waiting for the rate to rise, re-reading it every
// period; with a deadline on ctx it returns ErrPaused at once instead, so
// that a Lambda does not sleep to its deadline. A Limiter is safe for
// concurrent use; concurrent callers share one pace.
type Limiter struct {
	rates       *RateCache
	pacer       *Pacer
	clock       Clock
	burstWindow time.Duration
}

// LimiterOption sets an option of NewLimiter.
type LimiterOption func(*limiterOptions)

type limiterOptions struct {
	cache       RateCacheConfig
	peers       Peers
	clock       Clock
	burstWindow time.Duration
}

// WithClock runs the Limiter on clock (default: the wall clock).
func WithClock(clock Clock) LimiterOption { return func(o *limiterOptions) { o.clock = clock } }

// WithSafeRate sets the aggregate rate used while RATE is missing, expired
// or unreadable (default 10 messages/s, shared among the peers).
func WithSafeRate(perSecond float64) LimiterOption {
	return func(o *limiterOptions) { o.cache.SafeRate = perSecond }
}

// WithPeers shares the rate among the instances peers counts (default: this
// instance alone takes the whole rate).
func WithPeers(peers Peers) LimiterOption { return func(o *limiterOptions) { o.peers = peers } }

// NewLimiter returns a Limiter on the RATE of loopID that reader reads (for
// example a *ddbstore.Store on the loop's table).
func NewLimiter(reader RateReader, loopID string, opts ...LimiterOption) *Limiter {
	o := limiterOptions{cache: RateCacheConfig{Loop: loopID, SafeRate: 10}, clock: WallClock{}, burstWindow: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	rates := NewRateCache(o.cache, reader, o.peers, o.clock, nil, nil)
	return &Limiter{rates: rates, pacer: NewPacer(o.clock, 0, 1), clock: o.clock, burstWindow: o.burstWindow}
}

// Allowed returns the rate in force (read at most once per rate period)
// after setting the pace to this instance's share.
func (l *Limiter) Allowed(ctx context.Context) Allowed {
	return sharePace(l.rates.Allowed(ctx), l.pacer, 1, l.burstWindow)
}

// Wait blocks until n messages may go at this instance's share of the
// allowed rate, or ctx ends. See Limiter for a paused loop.
func (l *Limiter) Wait(ctx context.Context, n int) error {
	_, hasDeadline := ctx.Deadline()
	for {
		l.Allowed(ctx)
		err := l.pacer.Wait(ctx, n)
		if !errors.Is(err, ErrPaused) || hasDeadline {
			return err
		}
		if err := l.clock.Sleep(ctx, l.rates.Period()); err != nil {
			return err
		}
	}
}

// sharePace sets pacer to the share a, with a bucket of one batch or of
// window's worth of messages, whichever is larger.
func sharePace(a Allowed, pacer *Pacer, batch int, window time.Duration) Allowed {
	if a.Share != pacer.Rate() {
		pacer.SetRate(a.Share)
		burst := batch
		if !math.IsInf(a.Share, 1) {
			burst = max(burst, int(math.Ceil(a.Share*window.Seconds())))
		}
		pacer.SetBurst(burst)
	}
	return a
}
