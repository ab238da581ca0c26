package consume

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// DefaultRatePeriod is the default bound on the age of a cached rate: a rate
// change reaches every consumer within one period, and each consumer reads
// RATE at most once per period (not once per message or per batch).
const DefaultRatePeriod = time.Second

// Peers counts the live consumers that share a loop's allowed rate; each
// takes an equal share. See docs/consumers.md for the trade-offs.
type Peers interface {
	Live(ctx context.Context) (int, error)
}

// FixedPeers is a fixed number of consumers: the event source mapping's
// MaximumConcurrency, or the ECS service's desired count.
type FixedPeers int

var _ Peers = FixedPeers(1)

// Live returns n (at least 1).
func (n FixedPeers) Live(context.Context) (int, error) { return max(int(n), 1), nil }

// Allowed is the rate a consumer may use, as last read.
type Allowed struct {
	// Total is the loop's allowed aggregate rate (messages/s).
	Total float64
	// Share is this consumer's part of Total: Total / Peers.
	Share float64
	// Peers is the number of consumers sharing Total.
	Peers int
	// Fallback is true when RATE was missing, stale or unreadable and the
	// configured safe rate is in force; Reason says why.
	Fallback bool
	Reason   string
	// ReadAt is when RATE was read (by the consumer's clock).
	ReadAt time.Time
	// Inner is the inner loop's settings that RATE carries (the loop's
	// PARAMS inner_loop): nil when it carries none, and on Fallback.
	Inner *protocol.InnerSettings
}

// RateCacheConfig configures a RateCache.
type RateCacheConfig struct {
	// Loop is the loop id whose RATE item is read.
	Loop string
	// Period bounds the age of the cached rate (DefaultRatePeriod when 0).
	Period time.Duration
	// SafeRate is the aggregate rate used when RATE is missing, expired or
	// unreadable (messages/s, shared among peers like a real rate).
	SafeRate float64
	// MaxAge treats a RATE written longer ago than this as stale even if it
	// has no expiry (0: only ExpiresAt counts).
	MaxAge time.Duration
	// Weights, when set, is called with RATE's node weights at every read
	// of RATE (at most once per Period, never per message): nil when RATE
	// has none, or is missing, expired or unreadable. A consumer of a
	// balanced loop sets its HTTP sink's picker from it (wrr.Spread
	// gives equal weights for nil).
	Weights func(map[string]float64)
	// ReadTimeout bounds each read of RATE and each count of live
	// consumers (default DefaultRateReadTimeout), whatever the caller's
	// context: a connection to DynamoDB that hangs silently must not hang
	// the consumer (the worker's context has no deadline) nor run a Lambda
	// to its deadline. A read that times out keeps the last valid RATE.
	ReadTimeout time.Duration
}

// DefaultRateReadTimeout is RateCacheConfig.ReadTimeout's default.
const DefaultRateReadTimeout = 2 * time.Second

// RateCache reads a loop's RATE at most once per Period and hands out the
// cached value in between. A value it returns is never older than Period.
// Missing, expired or unreadable rates fall back to SafeRate, logged and
// counted in Stats.RateFallbacks; a failed read keeps the last valid RATE
// while it has not expired (nor passed MaxAge), so that one throttled read
// does not swap a low RATE for a higher safe rate. It is safe for
// concurrent use.
type RateCache struct {
	cfg    RateCacheConfig
	reader RateReader
	peers  Peers
	clock  Clock
	log    *slog.Logger
	stats  *Stats

	mu      sync.Mutex
	cur     Allowed
	ok      bool          // cur holds a read
	last    protocol.Rate // the last valid RATE read
	hasLast bool
}

// NewRateCache returns a cache over reader. peers may be nil (one consumer);
// stats may be nil.
func NewRateCache(cfg RateCacheConfig, reader RateReader, peers Peers, clock Clock, log *slog.Logger, stats *Stats) *RateCache {
	cfg.Period = defaults.Positive(cfg.Period, DefaultRatePeriod)
	cfg.ReadTimeout = defaults.Positive(cfg.ReadTimeout, DefaultRateReadTimeout)
	if peers == nil {
		peers = FixedPeers(1)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if stats == nil {
		stats = &Stats{}
	}
	return &RateCache{cfg: cfg, reader: reader, peers: peers, clock: clock, log: log, stats: stats}
}

// Period returns the cache period.
func (c *RateCache) Period() time.Duration { return c.cfg.Period }

// Allowed returns the rate in force, reading RATE when the cached value is
// Period old or older.
func (c *RateCache) Allowed(ctx context.Context) Allowed {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if c.ok && now.Sub(c.cur.ReadAt) < c.cfg.Period {
		return c.cur
	}
	a := c.read(ctx, now)
	c.cur, c.ok = a, true
	c.stats.setAllowed(a)
	return a
}

func (c *RateCache) read(ctx context.Context, now time.Time) Allowed {
	lctx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
	n, err := c.peers.Live(lctx)
	cancel()
	if err != nil || n < 1 {
		c.log.WarnContext(ctx, "count live consumers failed; assuming previous count", "loop", c.cfg.Loop, "err", err)
		n = max(c.cur.Peers, 1)
	}
	a := Allowed{Peers: n, ReadAt: now}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.ReadTimeout)
	r, err := c.reader.ReadRate(rctx, c.cfg.Loop)
	cancel()
	switch {
	case errors.Is(err, protocol.ErrNotFound):
		a.Fallback, a.Reason = true, "rate missing"
	case err != nil && c.hasLast && c.invalid(c.last, now) == "":
		// One failed read does not void a RATE still in force.
		c.log.WarnContext(ctx, "read rate failed; keeping the last valid rate", "loop", c.cfg.Loop, "err", err,
			"rate", c.last.PerSecond, "expires_at", c.last.ExpiresAt)
		r, a.Total = c.last, c.last.PerSecond
	case err != nil:
		a.Fallback, a.Reason = true, fmt.Sprintf("read rate: %v", err)
	default:
		if a.Reason = c.invalid(r, now); a.Reason != "" {
			a.Fallback = true
		} else {
			a.Total, c.last, c.hasLast = r.PerSecond, r, true
		}
	}
	if a.Fallback {
		a.Total = c.cfg.SafeRate
		c.stats.RateFallbacks.Add(1)
		c.log.WarnContext(ctx, "using safe rate", "loop", c.cfg.Loop, "reason", a.Reason, "safe_rate", c.cfg.SafeRate)
	}
	a.Share = a.Total / float64(n)
	if !a.Fallback {
		a.Inner = r.Inner
	}
	if c.cfg.Weights != nil {
		var w map[string]float64
		if !a.Fallback {
			w = r.Weights
		}
		c.cfg.Weights(w)
	}
	return a
}

// invalid says why r may not be used at now ("" when it may).
func (c *RateCache) invalid(r protocol.Rate, now time.Time) string {
	switch {
	case r.Expired(now):
		return fmt.Sprintf("rate expired at %s", r.ExpiresAt.Format(time.RFC3339))
	case c.cfg.MaxAge > 0 && !r.WrittenAt.IsZero() && now.Sub(r.WrittenAt) > c.cfg.MaxAge:
		return fmt.Sprintf("rate written at %s is older than %s", r.WrittenAt.Format(time.RFC3339), c.cfg.MaxAge)
	case math.IsNaN(r.PerSecond) || r.PerSecond < 0:
		return fmt.Sprintf("rate %v is invalid", r.PerSecond)
	}
	return ""
}
