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
// that a Lambda does not sleep to its deadline. WaitUpTo takes what fits
// before ctx's deadline and says how much that is. With WithLease, the
// instance keeps a lease: it shares the rate among the live instances, and
// Stored reports what the caller stored, so that the controller counts it
// with the other consumers' (without a report the controller undercounts
// what the loop takes). A Limiter is safe for concurrent use; concurrent
// callers share one pace.
type Limiter struct {
	rates       *RateCache
	pacer       *Pacer
	clock       Clock
	burstWindow time.Duration
	stats       *Stats
	lease       *Lease
}

// LimiterOption sets an option of NewLimiter.
type LimiterOption func(*limiterOptions)

type limiterOptions struct {
	cache       RateCacheConfig
	peers       Peers
	clock       Clock
	burstWindow time.Duration
	leaseStore  PeerStore
	lease       LeaseConfig
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

// WithLease keeps a lease for this instance on store (a Lease with cfg;
// cfg.Loop is the Limiter's loop): the rate is shared among the live
// instances (WithPeers is then ignored), and the lease reports what
// Stored counted. Close the Limiter when the instance stops. Use the same
// store as the Limiter's reader: a *ddbstore.Store picks the lease layout
// from the RATE it read.
func WithLease(store PeerStore, cfg LeaseConfig) LimiterOption {
	return func(o *limiterOptions) { o.leaseStore, o.lease = store, cfg }
}

// NewLimiter returns a Limiter on the RATE of loopID that reader reads (for
// example a *ddbstore.Store on the loop's table).
func NewLimiter(reader RateReader, loopID string, opts ...LimiterOption) *Limiter {
	o := limiterOptions{cache: RateCacheConfig{Loop: loopID, SafeRate: 10}, clock: WallClock{}, burstWindow: time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	l := &Limiter{pacer: NewPacer(o.clock, 0, 1), clock: o.clock, burstWindow: o.burstWindow, stats: &Stats{}}
	if o.leaseStore != nil {
		o.lease.Loop = loopID
		l.lease = NewLease(o.lease, o.leaseStore, l.stats, o.clock, nil)
		o.peers = l.lease
	}
	l.rates = NewRateCache(o.cache, reader, o.peers, o.clock, nil, l.stats)
	return l
}

// Stored reports that the caller stored n messages of one batch (after
// the Wait or WaitUpTo that let them through), and how long the batch's
// work took without the wait (0 when unknown): the lease's next refresh
// carries the running counts to the controller, which turns them into the
// processed rate (and, for an event source mapping, the batch time).
// Without WithLease it only counts (Stats).
func (l *Limiter) Stored(n int, working time.Duration) {
	if n <= 0 {
		return
	}
	l.stats.Stored.Add(int64(n))
	l.stats.AddBatch(n, working)
}

// Stats returns the Limiter's counters: what Stored counted and the rate
// in force.
func (l *Limiter) Stats() *Stats { return l.stats }

// Close closes the lease (Lease.Close: the last counts, and the other
// instances stop counting this one at once); nothing without WithLease.
func (l *Limiter) Close(ctx context.Context) error {
	if l.lease == nil {
		return nil
	}
	return l.lease.Close(ctx)
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

// WaitUpTo lets through as many of n messages as may go before ctx's
// deadline: it waits for their pacing slots and returns how many that is,
// from n (all fit) down to 0 (not one fits: it returns at once). The
// caller hands the other n-k back to its queue (or keeps them for its next
// call) rather than sleeping into its deadline; leave the time to store
// the k in ctx's deadline (context.WithDeadline, earlier than the
// invocation's). While it waits, it re-reads the rate every rate period. A
// paused loop returns 0 and ErrPaused at once. Without a deadline on ctx,
// WaitUpTo is Wait and returns n.
func (l *Limiter) WaitUpTo(ctx context.Context, n int) (int, error) {
	by, ok := ctx.Deadline()
	if !ok {
		if err := l.Wait(ctx, n); err != nil {
			return 0, err
		}
		return max(n, 0), nil
	}
	for {
		l.Allowed(ctx)
		k, done, err := l.pacer.waitSlice(ctx, n, by, l.rates.Period())
		if err != nil || done {
			return k, err
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
