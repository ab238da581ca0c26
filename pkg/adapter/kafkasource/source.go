// Package kafkasource is the Kafka message source of the consumers: a
// franz-go consumer-group member that serves consume.Source and
// consume.DeadLetterer.
//
// Guarantees, and how they are kept:
//
//   - Offsets are committed only after the sink stored the records
//     (autocommit is disabled). Per partition the source commits the offset
//     after the highest record of an unbroken run of settled records: a
//     record neither stored nor dead-lettered holds the partition's commit
//     back, so a crash or SIGKILL redelivers it (and the stored records
//     after it not yet committed, which the idempotent sink absorbs).
//     Commits are synchronous; Ack commits at most once per CommitInterval
//     (default 1 s), DeadLetter, revocations and Close at once.
//   - Rebalances: a rebalance waits (BlockRebalanceOnPoll) only from a poll
//     until its records are registered, inside Receive; it does not wait for
//     the batch to be stored, because the consumer holds a batch for its
//     pacing slot (up to MaxHold, and indefinitely while the allowed rate is
//     zero), which would stall the whole group. OnPartitionsRevoked commits
//     the settled prefix of the revoked partitions and forgets them;
//     OnPartitionsLost forgets them without committing. A batch still held
//     for a partition that was taken away is acknowledged into nothing: its
//     records come again to the new owner from the last commit (duplicates
//     the sink absorbs; nothing missing).
//   - Released records (not tried: shutdown, pacing cut short) are kept and
//     handed out again, first, by the next Receive, with their ReceiveCount
//     grown; they keep the partition's commit point behind them.
//   - Records the destination failed (Retry) are handed out again only
//     after a backoff that grows with their attempts (Config.RetryBackoff),
//     meanwhile the source serves the other records and partitions; after
//     Config.MaxAttempts attempts a record goes to the dead-letter topic with
//     the reason "retries exhausted after N attempts: <last failure>", so
//     that one stuck record never stalls its partition's commits for ever.
//     While the whole destination is down the consumer's circuit breaker
//     stops taking records, which spends no attempts; what fails while the
//     destination fails as a whole (a brownout: consume.Report.Outage)
//     comes back through RetryOutage and does not count against
//     MaxAttempts.
//   - Poison records are produced synchronously to the dead-letter topic
//     (Config.DeadLetterTopic, default "<topic>.dlt") with the reason in the
//     header "sluice-dlt-reason" and their origin in "sluice-dlt-origin"
//     (topic/partition/offset); only then are their offsets settled. Create
//     the dead-letter topic with the topic (or let the broker auto-create
//     it). One produce waits at most Config.DeadLetterTimeout (franz-go
//     retries retriable errors without limit). A dead letter too large for
//     the topic is produced again with its value cut to
//     TruncatedValueBytes (header "sluice-dlt-truncated"): a refusal that
//     can never succeed does not hold the partition. While the topic
//     cannot be written otherwise (authorization, the topic missing, a
//     retriable error past the timeout), the source keeps the poison
//     records with their reason and produces them again after a backoff
//     growing with the refusals (not handed out again: the destination
//     never sees them twice); they hold their partition's commit back,
//     Config.MaxHeld bounds what piles up behind them,
//     Stats.DeadLetterRefused counts the refusals, and each refused record
//     is logged at error level with the kind of refusal. Nothing is
//     dropped.
//   - Fetching is paused while the consumer is out of budget: after a poll,
//     if the batch needs more than PauseAfter at the consumer's pacing rate
//     (or the rate is zero), fetching stops until the next Receive, so that
//     the client does not read ahead of the allowed rate. Whole topics are
//     paused (PauseFetchTopics), so partitions assigned meanwhile stay
//     paused too.
//   - A member that dies without leaving (SIGKILL) holds its partitions
//     until the group's session timeout: 10 s by default here
//     (Config.SessionTimeout), not the client's 45 s.
//
// Message ids: the header named Config.IDHeader (default "message-id") when
// the producer set it, else "topic/partition/offset". Offsets never change,
// so the default id is already stable across redelivery; a producer-set id
// also absorbs the producer's own retries (one message written twice at two
// offsets) in the MySQL sink.
package kafkasource

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/pkg/consume"
)

var (
	_ consume.Source        = (*Source)(nil)
	_ consume.DeadLetterer  = (*Source)(nil)
	_ consume.Retrier       = (*Source)(nil)
	_ consume.OutageRetrier = (*Source)(nil)
)

// Header names set on dead-lettered records.
const (
	// HeaderReason carries why a record was dead-lettered.
	HeaderReason = "sluice-dlt-reason"
	// HeaderOrigin carries the record's origin as topic/partition/offset.
	HeaderOrigin = "sluice-dlt-origin"
	// HeaderID carries the consumer's message id of a dead-lettered record.
	HeaderID = "sluice-dlt-id"
	// HeaderTruncated is set on a dead letter whose value was cut because
	// the dead-letter topic refused it as too large: "value cut from N to
	// M bytes".
	HeaderTruncated = "sluice-dlt-truncated"
)

// TruncatedValueBytes is how much of a record's value a dead letter keeps
// when the dead-letter topic refused the whole of it as too large.
const TruncatedValueBytes = 1024

// ErrClosed is returned by Receive after Close.
var ErrClosed = errors.New("kafka source closed")

// RateSource tells the consumer's current pacing rate in messages/s (+Inf
// for no limit). *consume.Pacer satisfies it.
type RateSource interface {
	Rate() float64
}

var _ RateSource = (*consume.Pacer)(nil)

// Config configures a Source.
type Config struct {
	// Brokers are the seed brokers (host:port).
	Brokers []string
	// Topics are the topics consumed.
	Topics []string
	// Group is the consumer group.
	Group string
	// DeadLetterTopic receives poison records; "" means "<topic>.dlt" of
	// each record's topic.
	DeadLetterTopic string
	// IDHeader names the header that carries a producer-set message id; ""
	// means "message-id". Records without it get "topic/partition/offset".
	IDHeader string
	// Pacer is the consumer's pacer (consume.Consumer.Pacer()); nil never
	// pauses fetching.
	Pacer RateSource
	// PauseAfter pauses fetching after a poll whose batch needs longer than
	// this at the pacer's rate (default 1 s).
	PauseAfter time.Duration
	// CommitInterval bounds how often Ack commits: at most once per
	// interval, the settled offsets of every partition at once (an idle
	// Receive commits what waits once the interval passed). A commit costs
	// a broker round trip (5 to 10 ms on Kafka 4 here, whose group
	// coordinator lingers before appending): committing in every Ack caps
	// one consumer near 100 batches/s. The price of an interval is that a
	// crash redelivers up to one interval of stored records, which the
	// idempotent sink absorbs. Revocations, DeadLetter and Close always
	// commit at once. Default 1 s; negative: every Ack commits.
	CommitInterval time.Duration
	// Clock drives CommitInterval (default consume.WallClock).
	Clock consume.Clock
	// SessionTimeout is how long the group waits for a member that stopped
	// heartbeating (a crashed or SIGKILLed worker) before its partitions
	// move on; default 10 s (Kafka's client default is 45 s). Heartbeats run
	// in the background, so a slow batch does not count against it.
	SessionTimeout time.Duration
	// DeadLetterTimeout bounds one produce of dead letters (default 10 s):
	// franz-go retries retriable refusals (NOT_ENOUGH_REPLICAS,
	// LEADER_NOT_AVAILABLE, REQUEST_TIMED_OUT) without limit, and the
	// consumer would wait on them, with all its partitions, for as long as
	// the context of DeadLetter allows (its StoreTimeout, 30 s). At the
	// timeout the refusal is counted and the source produces the dead
	// letter again after a backoff. franz-go fails a record only when it
	// tries it again (after a metadata refresh, at most every 5 s by
	// default), so a refusal may take up to that much longer to count.
	DeadLetterTimeout time.Duration
	// MaxAttempts bounds the tries of a record the destination keeps
	// failing: then it goes to the dead-letter topic with the reason
	// (default 10).
	MaxAttempts int
	// RetryBackoff is the wait before a failed record is tried again, by its
	// attempts (equal jitter; default 1 s doubling to 60 s: ten attempts
	// span at least about 2.5 minutes).
	RetryBackoff consume.Backoff
	// MaxHeld bounds the records of one partition delivered and not yet
	// committable (stored or not, behind a record neither stored nor
	// dead-lettered): at the bound the partition is no longer fetched
	// until its commit point moves (default 10,000). A poison record the
	// dead-letter topic refuses, or a record retried for minutes, then
	// stops its partition instead of growing what a crash redelivers
	// without bound; the other partitions go on.
	MaxHeld int
	// Log receives the source's logs; nil discards them.
	Log *slog.Logger
	// Opts are extra franz-go options (timeouts, TLS, SASL), applied last.
	Opts []kgo.Opt
}

func (c Config) withDefaults() Config {
	if c.IDHeader == "" {
		c.IDHeader = "message-id"
	}
	c.PauseAfter = defaults.Positive(c.PauseAfter, time.Second)
	if c.Clock == nil {
		c.Clock = consume.WallClock{}
	}
	if c.CommitInterval == 0 {
		c.CommitInterval = time.Second
	}
	c.SessionTimeout = defaults.Positive(c.SessionTimeout, 10*time.Second)
	c.MaxAttempts = defaults.Positive(c.MaxAttempts, 10)
	c.DeadLetterTimeout = defaults.Positive(c.DeadLetterTimeout, 10*time.Second)
	c.MaxHeld = defaults.Positive(c.MaxHeld, 10_000)
	if c.RetryBackoff.Base <= 0 {
		c.RetryBackoff = consume.Backoff{Base: time.Second, Max: time.Minute}
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Stats are the source's counters, safe for concurrent use.
type Stats struct {
	// Commits counts successful offset commits; CommitErrors failed ones.
	Commits, CommitErrors atomic.Int64
	// DeadLettered counts records produced to the dead-letter topic.
	DeadLettered atomic.Int64
	// Exhausted counts records dead-lettered because they failed
	// MaxAttempts times (part of DeadLettered once produced).
	Exhausted atomic.Int64
	// DeadLetterRefused counts the refusals of poison records by the
	// dead-letter topic (each record is produced again after a backoff,
	// and counted again if refused again): alarm on any.
	DeadLetterRefused atomic.Int64
	// DeadLetterTruncated counts dead letters sent with their value cut
	// to TruncatedValueBytes because the dead-letter topic refused them as
	// too large (part of DeadLettered; the refusal that led to the cut is
	// not in DeadLetterRefused).
	DeadLetterTruncated atomic.Int64
	// Pauses counts the times fetching was paused for lack of budget.
	Pauses atomic.Int64
	// Revoked and Lost count partitions taken away by rebalances.
	Revoked, Lost atomic.Int64
}

type tp struct {
	topic     string
	partition int32
}

// pendingMsg is a message given back, due again at due.
type pendingMsg struct {
	m   consume.Message
	due time.Time
}

// deadPending is a poison record the dead-letter topic refused tries
// times, produced again at due.
type deadPending struct {
	p     consume.Poison
	due   time.Time
	tries int
}

// handle is what a consume.Message carries back to the source: the record
// and the ledger (one partition's assignment) it was delivered from.
type handle struct {
	rec *kgo.Record
	led *ledger
	// outages counts the record's deliveries that failed with the whole
	// destination (RetryOutage): they do not count against MaxAttempts.
	outages int
}

// Source is a Kafka consumer-group member serving consume.Source. It is safe
// for concurrent use.
type Source struct {
	cfg    Config
	cl     *kgo.Client
	log    *slog.Logger
	stats  Stats
	closed atomic.Bool

	mu      sync.Mutex
	parts   map[tp]*ledger
	pending []pendingMsg  // released or retried, handed out again first once due
	dead    []deadPending // refused by the dead-letter topic, produced again once due
	paused  bool
	// full are the partitions not fetched because they hold MaxHeld
	// records (Config.MaxHeld).
	full map[tp]bool
	// lastCommit is when the last commit was sent (for CommitInterval).
	lastCommit time.Time
}

// New joins cfg.Group and returns the Source. Nothing is fetched before the
// first Receive returns; a group without commits starts at the earliest
// offset, so that nothing produced before the group existed is skipped.
func New(cfg Config) (*Source, error) {
	cfg = cfg.withDefaults()
	if len(cfg.Brokers) == 0 || len(cfg.Topics) == 0 || cfg.Group == "" {
		return nil, fmt.Errorf("kafka source: brokers, topics and group are required (got %v, %v, %q)", cfg.Brokers, cfg.Topics, cfg.Group)
	}
	s := &Source{cfg: cfg, log: cfg.Log, parts: map[tp]*ledger{}, full: map[tp]bool{}}
	opts := []kgo.Opt{
		kgo.SeedBrokers(cfg.Brokers...),
		kgo.ConsumerGroup(cfg.Group),
		kgo.SessionTimeout(cfg.SessionTimeout),
		kgo.HeartbeatInterval(min(3*time.Second, cfg.SessionTimeout/5)),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(s.onAssigned),
		kgo.OnPartitionsRevoked(s.onRevoked),
		kgo.OnPartitionsLost(s.onLost),
		kgo.AllowAutoTopicCreation(), // the dead-letter topic, where the broker allows it
		kgo.RequiredAcks(kgo.AllISRAcks()),
	}
	cl, err := kgo.NewClient(append(opts, cfg.Opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka source for group %s: %w", cfg.Group, err)
	}
	s.cl = cl
	return s, nil
}

// Client returns the underlying franz-go client (for metrics such as lag).
func (s *Source) Client() *kgo.Client { return s.cl }

// Stats returns the source's counters.
func (s *Source) Stats() *Stats { return &s.stats }

// Receive returns up to max messages: released ones first, else records
// polled from the assigned partitions (blocking until there are some or
// ctx ends; then it returns none and no error).
func (s *Source) Receive(ctx context.Context, max int) ([]consume.Message, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	if max < 1 {
		max = 1
	}
	s.retryDead(ctx)
	if out := s.takePending(max); len(out) > 0 {
		return out, nil
	}
	s.resume()
	for {
		// While settled offsets wait for the commit interval, or a retried
		// record for its backoff, the poll wakes up in time for them.
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if wait, ok := s.wakeAfter(); ok {
			pctx, cancel = context.WithTimeout(ctx, wait)
		}
		out, err := s.poll(pctx, max)
		cancel()
		if len(out) > 0 {
			s.maybePause(len(out))
			return out, nil
		}
		if errors.Is(err, ErrClosed) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if pctx.Err() == nil {
			return nil, err
		}
		if err := s.Commit(ctx); err != nil {
			s.log.Warn("interval commit failed; retrying at the next", "err", err)
		}
		s.retryDead(ctx)
		if out := s.takePending(max); len(out) > 0 {
			return out, nil
		}
	}
}

// wakeAfter is how long a poll may block: until the next interval commit
// or the next retried record is due; ok is false when nothing waits.
func (s *Source) wakeAfter() (time.Duration, bool) {
	wait, ok := s.commitWait()
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Clock.Now()
	dues := make([]time.Time, 0, len(s.pending)+len(s.dead))
	for _, p := range s.pending {
		dues = append(dues, p.due)
	}
	for _, p := range s.dead {
		dues = append(dues, p.due)
	}
	for _, due := range dues {
		d := max(due.Sub(now), time.Millisecond)
		if !ok || d < wait {
			wait, ok = d, true
		}
	}
	return wait, ok
}

// poll polls up to max records and registers them in their ledgers.
func (s *Source) poll(ctx context.Context, max int) ([]consume.Message, error) {
	fs := s.cl.PollRecords(ctx, max)
	// Rebalances wait from the poll until the records are in their ledgers:
	// a record is never registered into an assignment it does not belong to.
	defer s.cl.AllowRebalance()
	var firstErr error
	fs.EachError(func(topic string, partition int32, err error) {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return
		}
		if errors.Is(err, kgo.ErrClientClosed) {
			firstErr = ErrClosed
			return
		}
		s.log.Warn("kafka fetch error", "topic", topic, "partition", partition, "err", err)
		if firstErr == nil {
			if topic == "" { // not about a partition: the group or the client
				firstErr = fmt.Errorf("kafka poll: %w", err)
			} else {
				firstErr = fmt.Errorf("fetch %s/%d: %w", topic, partition, err)
			}
		}
	})
	out := make([]consume.Message, 0, fs.NumRecords())
	s.mu.Lock()
	fs.EachRecord(func(r *kgo.Record) {
		k := tp{r.Topic, r.Partition}
		led := s.parts[k]
		if led == nil {
			led = newLedger()
			s.parts[k] = led
		}
		if !led.deliver(r.Offset, r.LeaderEpoch) {
			return
		}
		out = append(out, s.message(r, led))
	})
	s.bound()
	s.mu.Unlock()
	s.log.Debug("kafka poll", "records", len(out), "polled", fs.NumRecords(), "max", max, "err", firstErr)
	return out, firstErr
}

// commitWait tells how long until settled offsets are due for an interval
// commit; ok is false when nothing waits (or every Ack commits).
func (s *Source) commitWait() (time.Duration, bool) {
	if s.cfg.CommitInterval <= 0 {
		return 0, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	waiting := false
	for _, l := range s.parts {
		if l.due() {
			waiting = true
			break
		}
	}
	if !waiting {
		return 0, false
	}
	return max(s.cfg.CommitInterval-s.cfg.Clock.Now().Sub(s.lastCommit), time.Millisecond), true
}

// message converts a record handed out for the first time: its
// FirstReceivedAt is now, and stays with it when it is handed out again
// (a sink that waits for a missing parent row counts from it).
func (s *Source) message(r *kgo.Record, led *ledger) consume.Message {
	m := RecordMessage(r, s.cfg.IDHeader)
	m.Handle = &handle{rec: r, led: led}
	m.FirstReceivedAt = s.cfg.Clock.Now()
	return m
}

// RecordMessage converts a record to a consumer message: the body is its
// value, the id MessageID(r, idHeader), the attributes its headers and
// "kafka.topic", "kafka.partition", "kafka.offset" and "kafka.key". Handle
// is left for the caller.
func RecordMessage(r *kgo.Record, idHeader string) consume.Message {
	m := consume.Message{
		Body:         r.Value,
		ReceiveCount: 1,
		SentAt:       r.Timestamp,
		Attributes:   make(map[string]string, len(r.Headers)+4),
	}
	for _, h := range r.Headers {
		m.Attributes[h.Key] = string(h.Value)
	}
	m.ID = MessageID(r, idHeader)
	m.Attributes["kafka.topic"] = r.Topic
	m.Attributes["kafka.partition"] = strconv.Itoa(int(r.Partition))
	m.Attributes["kafka.offset"] = strconv.FormatInt(r.Offset, 10)
	if r.Key != nil {
		m.Attributes["kafka.key"] = string(r.Key)
	}
	return m
}

// MessageID returns the id a Source gives r: the value of the header named
// idHeader when it is set and not empty, else Origin(r).
func MessageID(r *kgo.Record, idHeader string) string {
	for _, h := range r.Headers {
		if h.Key == idHeader && len(h.Value) > 0 {
			return string(h.Value)
		}
	}
	return Origin(r)
}

// Origin returns a record's coordinates, "topic/partition/offset".
func Origin(r *kgo.Record) string {
	return r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
}

// takePending returns up to max released messages whose partition is still
// assigned (the others are dropped: their new owner reads them again).
func (s *Source) takePending(max int) []consume.Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []consume.Message
	var keep []pendingMsg
	now := s.cfg.Clock.Now()
	for _, p := range s.pending {
		h := p.m.Handle.(*handle)
		if s.parts[tp{h.rec.Topic, h.rec.Partition}] != h.led {
			continue
		}
		if len(out) < max && !now.Before(p.due) {
			p.m.ReceiveCount++
			out = append(out, p.m)
		} else {
			keep = append(keep, p)
		}
	}
	s.pending = keep
	return out
}

// maybePause stops fetching when a batch of n needs more than PauseAfter at
// the pacer's rate: the client would otherwise read ahead of the budget.
func (s *Source) maybePause(n int) {
	if s.cfg.Pacer == nil {
		return
	}
	r := s.cfg.Pacer.Rate()
	if r > 0 && float64(n)/r <= s.cfg.PauseAfter.Seconds() {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.paused {
		s.cl.PauseFetchTopics(s.cfg.Topics...)
		s.paused = true
		s.stats.Pauses.Add(1)
	}
}

func (s *Source) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paused {
		s.cl.ResumeFetchTopics(s.cfg.Topics...)
		s.paused = false
	}
}

// Held returns how many records are delivered and not yet committable,
// over every assigned partition (what a crash would redeliver).
func (s *Source) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, l := range s.parts {
		n += len(l.open)
	}
	return n
}

// Paused reports whether fetching is paused for lack of budget.
func (s *Source) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// settle marks msgs settled in their ledgers; messages from a partition no
// longer assigned (or not from this source) are skipped and counted.
func (s *Source) settle(msgs []consume.Message) (stale int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		h, ok := m.Handle.(*handle)
		if !ok || s.parts[tp{h.rec.Topic, h.rec.Partition}] != h.led {
			stale++
			continue
		}
		h.led.settle(h.rec.Offset)
	}
	s.bound()
	return stale
}

// bound stops fetching the partitions that hold MaxHeld records and
// fetches again those back under it. Records already buffered for a
// stopped partition are dropped by the client and fetched again later.
// s.mu is held.
func (s *Source) bound() {
	stop, again := map[string][]int32{}, map[string][]int32{}
	for k, l := range s.parts {
		switch full := len(l.open) >= s.cfg.MaxHeld; {
		case full && !s.full[k]:
			s.full[k] = true
			stop[k.topic] = append(stop[k.topic], k.partition)
		case !full && s.full[k]:
			delete(s.full, k)
			again[k.topic] = append(again[k.topic], k.partition)
		}
	}
	if len(stop) > 0 {
		s.cl.PauseFetchPartitions(stop)
		s.log.Warn("partitions hold the most records not yet committable (a record neither stored nor dead-lettered holds them back); not fetching them until it settles",
			"partitions", stop, "max_held", s.cfg.MaxHeld)
	}
	if len(again) > 0 {
		s.cl.ResumeFetchPartitions(again)
		s.log.Info("partitions fetched again: their records not yet committable are back under the bound", "partitions", again)
	}
}

// Ack records that msgs are stored and commits every partition whose commit
// point moved (with a CommitInterval, only once the interval has passed since
// the last commit). A commit error is returned (the records stay stored and
// the next commit covers them).
func (s *Source) Ack(ctx context.Context, msgs []consume.Message) error {
	if stale := s.settle(msgs); stale > 0 {
		s.log.Info("acknowledged records of partitions no longer assigned; their new owner redelivers them", "records", stale)
	}
	if s.cfg.CommitInterval > 0 {
		s.mu.Lock()
		early := s.cfg.Clock.Now().Sub(s.lastCommit) < s.cfg.CommitInterval
		s.mu.Unlock()
		if early {
			return nil
		}
	}
	return s.Commit(ctx)
}

// Release gives msgs back: the next Receive hands them out again. Their
// partitions' commit points stay behind them.
func (s *Source) Release(_ context.Context, msgs []consume.Message) error {
	return s.giveBack(msgs, func(consume.Message) time.Duration { return 0 })
}

// giveBack keeps msgs to hand them out again after wait(m).
func (s *Source) giveBack(msgs []consume.Message, wait func(consume.Message) time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if _, ok := m.Handle.(*handle); !ok {
			return fmt.Errorf("release message %s: not from a kafka source", m.ID)
		}
	}
	now := s.cfg.Clock.Now()
	for _, m := range msgs {
		s.pending = append(s.pending, pendingMsg{m: m, due: now.Add(wait(m))})
	}
	return nil
}

// Retry gives back records the destination failed: each is handed out
// again after RetryBackoff for its attempts (ReceiveCount), and one that has
// had MaxAttempts of its own (not counting those that failed with the
// whole destination: RetryOutage) goes to the dead-letter topic with the
// reason "retries exhausted after N attempts: cause".
func (s *Source) Retry(ctx context.Context, msgs []consume.Message, cause string) error {
	var again []consume.Message
	var spent []consume.Poison
	for _, m := range msgs {
		if own := s.ownAttempts(m); own >= s.cfg.MaxAttempts {
			spent = append(spent, consume.Poison{Message: m, Reason: fmt.Sprintf("retries exhausted after %d attempts: %s", own, cause)})
			continue
		}
		again = append(again, m)
	}
	err := s.giveBack(again, func(m consume.Message) time.Duration { return s.cfg.RetryBackoff.EqualJitter(max(m.ReceiveCount, 1)) })
	if len(spent) > 0 {
		s.log.Warn("records failed too often; dead-lettering them", "records", len(spent), "cause", cause)
		s.stats.Exhausted.Add(int64(len(spent)))
		err = errors.Join(err, s.DeadLetter(ctx, spent))
	}
	return err
}

// RetryOutage gives back records that failed while the whole destination
// was failing (consume.Report.Outage: an outage, a brownout): handed out
// again after RetryBackoff for their deliveries, as Retry does, but the
// failure does not count against MaxAttempts, so that a brownout that
// fails every record alike exhausts none (consume.OutageRetrier).
func (s *Source) RetryOutage(_ context.Context, msgs []consume.Message, _ string) error {
	s.mu.Lock()
	for _, m := range msgs {
		if h, ok := m.Handle.(*handle); ok {
			h.outages++
		}
	}
	s.mu.Unlock()
	return s.giveBack(msgs, func(m consume.Message) time.Duration { return s.cfg.RetryBackoff.EqualJitter(max(m.ReceiveCount, 1)) })
}

// ownAttempts is how often m was tried and failed for its own sake: its
// deliveries less those that failed with the whole destination.
func (s *Source) ownAttempts(m consume.Message) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := m.Handle.(*handle); ok {
		return m.ReceiveCount - h.outages
	}
	return m.ReceiveCount
}

// DeadLetter produces the poison records to the dead-letter topic, waits for
// the broker's acknowledgement, and only then settles their offsets and
// commits. A record the broker did not take is kept, with its reason, and
// produced again by a later Receive after a backoff (it is not handed out
// again); it holds its partition's commit back meanwhile.
func (s *Source) DeadLetter(ctx context.Context, poison []consume.Poison) error {
	return s.deadLetter(ctx, poison, make([]int, len(poison)))
}

// deadLetter is DeadLetter for poison refused tries[i] times before.
func (s *Source) deadLetter(ctx context.Context, poison []consume.Poison, tries []int) error {
	recs := make([]*kgo.Record, 0, len(poison))
	for _, p := range poison {
		h, ok := p.Message.Handle.(*handle)
		if !ok {
			return fmt.Errorf("dead-letter message %s: not from a kafka source", p.Message.ID)
		}
		recs = append(recs, DeadRecord(h.rec, s.cfg.DeadLetterTopic, p.Message.ID, p.Reason))
	}
	res := produceDead(ctx, s.cl, s.cfg.DeadLetterTimeout, recs)
	var done []consume.Message
	var errs []error
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	for i, r := range res {
		if r.err == nil {
			done = append(done, poison[i].Message)
			continue
		}
		errs = append(errs, fmt.Errorf("produce %s to %s: %w", poison[i].Message.ID, recs[i].Topic, r.err))
		s.dead = append(s.dead, deadPending{p: poison[i], tries: tries[i] + 1, due: now.Add(s.cfg.RetryBackoff.EqualJitter(tries[i] + 1))})
	}
	s.mu.Unlock()
	s.logDead(poison, recs, res, tries)
	// A refused record holds its partition's commit back, and MaxHeld
	// bounds what piles up behind it.
	s.stats.DeadLetterRefused.Add(int64(len(errs)))
	s.stats.DeadLettered.Add(int64(len(done)))
	s.settle(done)
	if err := s.Commit(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// logDead logs what became of dead letters: each cut one, each refused
// one the first time it is refused (with the kind of refusal; later
// refusals are counted, and logged once per retry by retryDead), and each
// taken after refusals.
func (s *Source) logDead(poison []consume.Poison, recs []*kgo.Record, res []producedDead, tries []int) {
	for i, r := range res {
		id, origin := poison[i].Message.ID, poison[i].Message.Handle.(*handle).rec
		switch {
		case r.err != nil && tries[i] == 0:
			s.log.Error("dead-letter topic refused a record; it holds its partition's commit back, Stats.DeadLetterRefused counts the refusals",
				"id", id, "origin", Origin(origin), "topic", recs[i].Topic, "reason", poison[i].Reason, "refusal", deadLetterKind(r.err), "err", r.err)
		case r.err == nil && r.cut > 0:
			s.stats.DeadLetterTruncated.Add(1)
			s.log.Warn("dead letter too large for the dead-letter topic; sent with its value cut (the whole record stays at its origin until retention)",
				"id", id, "origin", Origin(origin), "topic", recs[i].Topic, "value_bytes", r.cut, "kept_bytes", TruncatedValueBytes)
		case r.err == nil && tries[i] > 0:
			s.log.Info("dead-letter topic took a record it had refused", "id", id, "origin", Origin(origin), "refusals", tries[i])
		}
	}
}

// retryDead produces again the refused dead letters that are due, of the
// partitions still assigned (the others' new owner reads them again).
func (s *Source) retryDead(ctx context.Context) {
	s.mu.Lock()
	var poison []consume.Poison
	var tries []int
	var keep []deadPending
	now := s.cfg.Clock.Now()
	for _, d := range s.dead {
		h := d.p.Message.Handle.(*handle)
		switch {
		case s.parts[tp{h.rec.Topic, h.rec.Partition}] != h.led:
		case now.Before(d.due):
			keep = append(keep, d)
		default:
			poison, tries = append(poison, d.p), append(tries, d.tries)
		}
	}
	s.dead = keep
	s.mu.Unlock()
	if len(poison) == 0 {
		return
	}
	if err := s.deadLetter(ctx, poison, tries); err != nil {
		s.log.Warn("dead letters refused again", "records", len(poison), "err", err)
	}
}

// DeadRecord returns the dead-letter copy of r for topic ("" means
// "<r's topic>.dlt"): its key, value, timestamp and headers, with the
// reason, origin and message id in HeaderReason, HeaderOrigin and HeaderID.
func DeadRecord(r *kgo.Record, topic, id, reason string) *kgo.Record {
	if topic == "" {
		topic = r.Topic + ".dlt"
	}
	hs := make([]kgo.RecordHeader, 0, len(r.Headers)+3)
	for _, h := range r.Headers {
		switch h.Key {
		case HeaderReason, HeaderOrigin, HeaderID, HeaderTruncated:
		default:
			hs = append(hs, h)
		}
	}
	hs = append(hs,
		kgo.RecordHeader{Key: HeaderReason, Value: []byte(reason)},
		kgo.RecordHeader{Key: HeaderOrigin, Value: []byte(Origin(r))},
		kgo.RecordHeader{Key: HeaderID, Value: []byte(id)},
	)
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: hs, Timestamp: r.Timestamp}
}

// commitSet is what one commit sends: the offsets, and the ledger each was
// read from (so that a ledger replaced meanwhile is not marked committed).
type commitSet struct {
	offs map[string]map[int32]kgo.EpochOffset
	leds map[tp]*ledger
}

// due returns the commit points ahead of the last commit, for the given
// partitions (all when only is nil).
func (s *Source) due(only map[string][]int32) commitSet {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := commitSet{offs: map[string]map[int32]kgo.EpochOffset{}, leds: map[tp]*ledger{}}
	add := func(k tp, l *ledger) {
		if l == nil || !l.due() {
			return
		}
		if cs.offs[k.topic] == nil {
			cs.offs[k.topic] = map[int32]kgo.EpochOffset{}
		}
		cs.offs[k.topic][k.partition] = kgo.EpochOffset{Epoch: l.epoch, Offset: l.point}
		cs.leds[k] = l
	}
	if only == nil {
		for k, l := range s.parts {
			add(k, l)
		}
		return cs
	}
	for t, ps := range only {
		for _, p := range ps {
			add(tp{t, p}, s.parts[tp{t, p}])
		}
	}
	return cs
}

// commit commits cs synchronously and records what was committed.
func (s *Source) commit(ctx context.Context, cs commitSet) error {
	if len(cs.offs) == 0 {
		return nil
	}
	s.mu.Lock()
	s.lastCommit = s.cfg.Clock.Now()
	s.mu.Unlock()
	var rerr error
	s.cl.CommitOffsetsSync(ctx, cs.offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
					rerr = errors.Join(rerr, fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, perr))
					continue
				}
				k := tp{t.Topic, p.Partition}
				eo, ok := cs.offs[k.topic][k.partition]
				if l := cs.leds[k]; ok && l == s.parts[k] && eo.Offset > l.committed {
					l.committed = eo.Offset
				}
			}
		}
	})
	if rerr != nil {
		s.stats.CommitErrors.Add(1)
		return fmt.Errorf("commit offsets %v: %w", cs.offs, rerr)
	}
	s.stats.Commits.Add(1)
	return nil
}

// Commit commits the settled prefix of every assigned partition.
func (s *Source) Commit(ctx context.Context) error { return s.commit(ctx, s.due(nil)) }

// Lag returns the group's lag on the consumed topics: records beyond the
// group's commits (for a partition without commit, beyond its log start).
// It asks the brokers (describe group, committed, start and end offsets).
func (s *Source) Lag(ctx context.Context) (int64, error) {
	ls, err := kadm.NewClient(s.cl).Lag(ctx, s.cfg.Group)
	if err != nil {
		return 0, fmt.Errorf("lag of group %s: %w", s.cfg.Group, err)
	}
	l, ok := ls[s.cfg.Group]
	if !ok {
		return 0, fmt.Errorf("lag of group %s: not in the answer", s.cfg.Group)
	}
	if err := l.Error(); err != nil {
		return 0, fmt.Errorf("lag of group %s: %w", s.cfg.Group, err)
	}
	var total int64
	for _, t := range s.cfg.Topics {
		for _, pl := range l.Lag[t] {
			if pl.Err != nil {
				return 0, fmt.Errorf("lag of group %s on %s/%d: %w", s.cfg.Group, t, pl.Partition, pl.Err)
			}
			total += pl.Lag
		}
	}
	return total, nil
}

// Committed returns the offsets this member committed, per topic and
// partition, in its current assignment.
func (s *Source) Committed() map[string]map[int32]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]map[int32]int64{}
	for k, l := range s.parts {
		if l.committed < 0 {
			continue
		}
		if out[k.topic] == nil {
			out[k.topic] = map[int32]int64{}
		}
		out[k.topic][k.partition] = l.committed
	}
	return out
}

func (s *Source) onAssigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	s.log.Info("kafka partitions assigned", "group", s.cfg.Group, "partitions", assigned)
}

// onRevoked commits what was settled in the revoked partitions, then forgets
// them: records of theirs still held come again to the next owner.
func (s *Source) onRevoked(ctx context.Context, _ *kgo.Client, revoked map[string][]int32) {
	if err := s.commit(ctx, s.due(revoked)); err != nil {
		s.log.Warn("commit on revoke failed; the next owner redelivers from the previous commit", "err", err)
	}
	s.forget(revoked)
	if n := count(revoked); n > 0 {
		s.stats.Revoked.Add(int64(n))
		s.log.Info("kafka partitions revoked", "group", s.cfg.Group, "partitions", revoked)
	}
}

// onLost forgets the lost partitions without committing: another member may
// own them already, and its commits must not be overwritten.
func (s *Source) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	s.forget(lost)
	s.stats.Lost.Add(int64(count(lost)))
	s.log.Warn("kafka partitions lost", "group", s.cfg.Group, "partitions", lost)
}

// forget drops the ledgers of parts: acknowledgements of their records
// still held no longer count, and their released records are dropped.
func (s *Source) forget(parts map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	again := map[string][]int32{}
	for t, ps := range parts {
		for _, p := range ps {
			delete(s.parts, tp{t, p})
			if s.full[tp{t, p}] {
				// A paused partition stays paused in the client across
				// assignments: fetch it again if it comes back.
				delete(s.full, tp{t, p})
				again[t] = append(again[t], p)
			}
		}
	}
	if len(again) > 0 {
		s.cl.ResumeFetchPartitions(again)
	}
}

func count(parts map[string][]int32) int {
	n := 0
	for _, ps := range parts {
		n += len(ps)
	}
	return n
}

// Close commits what was settled, leaves the group (the revoke callback
// commits again whatever was settled meanwhile) and closes the client.
// Records delivered but not settled stay uncommitted: the next owner gets
// them. Close is idempotent.
func (s *Source) Close(ctx context.Context) error {
	if s.closed.Swap(true) {
		return nil
	}
	err := s.Commit(ctx)
	s.cl.CloseAllowingRebalance()
	return err
}
