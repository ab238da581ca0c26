package consume

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// PeerStore keeps the consumers' leases (protocol.Peer) in the loop's table:
// pkg/adapter/ddbstore and pkg/adapter/memstore serve it.
type PeerStore interface {
	// ReportPeer writes p, replacing the instance's previous lease.
	ReportPeer(ctx context.Context, p protocol.Peer) error
	// LivePeers counts loopID's leases in force at now.
	LivePeers(ctx context.Context, loopID string, now time.Time) (int, error)
}

// FleetReader is the optional capability of a PeerStore to read a loop's
// leases (ddbstore and memstore have it). A Lease on one reads them at
// each refresh while its consumer runs an inner loop, and keeps the
// fleet's latency ratio (protocol.FleetLatency) in the consumer's Stats,
// where the inner loop reads it: one Query of the loop's lease partition
// per refresh, whose read units grow with the leases in it.
type FleetReader interface {
	// LoopPeers returns loopID's leases, lapsed ones included.
	LoopPeers(ctx context.Context, loopID string) ([]protocol.Peer, error)
}

// Defaults of a LeaseConfig.
const (
	DefaultLeaseEvery = 2 * time.Second
	DefaultLeaseTTL   = 15 * time.Second
)

// LeaseConfig configures a Lease.
type LeaseConfig struct {
	// Loop is the loop id.
	Loop string
	// Instance identifies this consumer instance uniquely and for its whole
	// life (default: NewInstanceID()).
	Instance string
	// Every is the least time between two refreshes (DefaultLeaseEvery when
	// 0; at most half a protocol.LiveBucket, so that the instance is in every
	// bucket's live count while it runs); TTL is the lease's lifetime after
	// a refresh (DefaultLeaseTTL when 0; at least 2 x Every).
	Every, TTL time.Duration
	// Fallback is the number of peers assumed until the store has been
	// read once (default 1); a failed read keeps the last count. Set it to
	// the most instances that can run (the event source mapping's
	// MaximumConcurrency, the ECS desired count) to err on the slow side.
	Fallback int
}

// Lease is a consumer instance's lease on its loop and its report of what it
// stored: a Peers that shares RATE by the instances that actually run. At
// most once per Every, when the RateCache asks for the live count, it writes
// the lease (one write, with the running count of the messages this
// instance stored, from Stats.Stored, and of its batches, their messages
// and working time, from Stats.Batches, BatchMessages and Working) and counts the live leases (one read):
// never a call per message or per batch. The controller turns the counts
// into the processed rate (loop.Demand). It is safe for concurrent use.
type Lease struct {
	cfg   LeaseConfig
	store PeerStore
	stats *Stats
	clock Clock
	log   *slog.Logger

	mu      sync.Mutex
	started time.Time
	at      time.Time // last refresh attempt
	live    int
}

var _ Peers = (*Lease)(nil)

// NewInstanceID returns a random instance id.
func NewInstanceID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// NewLease returns the lease of one consumer instance; stats must be the
// consumer's (Consumer.Stats, or the Stats given to New). log may be nil.
func NewLease(cfg LeaseConfig, store PeerStore, stats *Stats, clock Clock, log *slog.Logger) *Lease {
	if cfg.Instance == "" {
		cfg.Instance = NewInstanceID()
	}
	cfg.Every = min(defaults.Positive(cfg.Every, DefaultLeaseEvery), protocol.LiveBucket/2)
	cfg.TTL = defaults.Positive(cfg.TTL, DefaultLeaseTTL)
	cfg.TTL = max(cfg.TTL, 2*cfg.Every)
	cfg.Fallback = max(cfg.Fallback, 1)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Lease{cfg: cfg, store: store, stats: stats, clock: clock, log: log, started: clock.Now(), live: cfg.Fallback}
}

// Instance returns the instance id.
func (l *Lease) Instance() string { return l.cfg.Instance }

// Live refreshes the lease when Every has passed since the last refresh and
// returns the number of live instances (this one included). A failed write
// or read is logged and the last count stays in force.
func (l *Lease) Live(ctx context.Context) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if !l.at.IsZero() && now.Sub(l.at) < l.cfg.Every {
		return l.live, nil
	}
	l.at = now
	if err := l.report(ctx, now, now.Add(l.cfg.TTL)); err != nil {
		l.log.WarnContext(ctx, "refresh consumer lease failed; keeping the last peer count", "loop", l.cfg.Loop, "instance", l.cfg.Instance, "peers", l.live, "err", err)
		return l.live, nil
	}
	n, err := l.store.LivePeers(ctx, l.cfg.Loop, now)
	if err != nil {
		l.log.WarnContext(ctx, "count live consumers failed; keeping the last peer count", "loop", l.cfg.Loop, "peers", l.live, "err", err)
		return l.live, nil
	}
	l.live = max(n, 1) // this instance's lease may not show yet in an eventually consistent read
	l.readFleet(ctx, now)
	return l.live, nil
}

// readFleet reads the fleet's latency ratio into the stats when the store
// can list leases and this consumer runs an inner loop; a failed read is
// logged and the last ratio ages (the inner loop then falls back to its
// own latency).
func (l *Lease) readFleet(ctx context.Context, now time.Time) {
	fr, ok := l.store.(FleetReader)
	if !ok || l.stats.InnerLatency.Load() <= 0 {
		return
	}
	peers, err := fr.LoopPeers(ctx, l.cfg.Loop)
	if err != nil {
		l.log.WarnContext(ctx, "read the consumers' leases for the fleet's latency failed; the inner loop uses its own", "loop", l.cfg.Loop, "err", err)
		return
	}
	ratio, n := protocol.FleetLatency(peers, now)
	l.stats.setFleet(ratio, n, now)
}

// Close reports the final count with a lapsed lease, so that the other
// instances stop counting this one at once: call it when the instance stops.
func (l *Lease) Close(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	return l.report(ctx, now, now)
}

func (l *Lease) report(ctx context.Context, now, expires time.Time) error {
	p := protocol.Peer{Loop: l.cfg.Loop, Instance: l.cfg.Instance, Stored: l.stats.Stored.Load(),
		StartedAt: l.started, ReportedAt: now, ExpiresAt: expires,
		Batches: l.stats.Batches.Load(), BatchMessages: l.stats.BatchMessages.Load(), Working: l.stats.Working(),
		Withheld: l.stats.Withheld.Load(), InnerLatency: time.Duration(l.stats.InnerLatency.Load()),
		InnerReference: time.Duration(l.stats.InnerReference.Load())}
	if err := l.store.ReportPeer(ctx, p); err != nil {
		return fmt.Errorf("report lease of %s on loop %s: %w", l.cfg.Instance, l.cfg.Loop, err)
	}
	return nil
}

// LeaseOrFixed returns the Peers a consumer shares RATE by: with report, a
// Lease on store for loopID that falls back to n peers until it has counted;
// without, the fixed count n (the product before the report: the controller
// then does not know what the consumers took).
func LeaseOrFixed(report bool, loopID string, n int, store PeerStore, stats *Stats, clock Clock, log *slog.Logger) Peers {
	if !report {
		return FixedPeers(n)
	}
	return NewLease(LeaseConfig{Loop: loopID, Fallback: n}, store, stats, clock, log)
}

// ParseReport parses the consumers' SLUICE_REPORT setting: "" or on (the
// default) reports, off does not.
func ParseReport(v string) (bool, error) {
	switch v {
	case "", "on":
		return true, nil
	case "off":
		return false, nil
	}
	return false, fmt.Errorf("SLUICE_REPORT=%q: want on or off", v)
}
