package consume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/unpaced"
)

// Config configures a Consumer.
type Config struct {
	// BatchSize is the most messages received at once (10 for SQS).
	BatchSize int
	// MaxHold bounds how long a received batch may wait for its pacing slot;
	// at low rates Run receives fewer messages so that
	// messages x 1/share <= MaxHold (default 2 s: small batches at low
	// rates keep the stored rate smooth, at the cost of one receive per
	// consumer per MaxHold; well below SQS's visibility timeout).
	MaxHold time.Duration
	// StoreTimeout bounds one Store and the acknowledgement after it; it
	// also lets a batch already paced finish after shutdown began
	// (default 30 s).
	StoreTimeout time.Duration
	// Validate rejects malformed payloads; a rejected message is poison.
	// nil means ValidJSON.
	Validate func(Message) error
	// BurstWindow sizes the pacer's bucket: it holds the larger of one
	// batch and BurstWindow x share messages (default 250 ms). A bucket
	// deeper than one batch lets a consumer catch up after it slept too long
	// or spent time storing (timer slack on a busy machine, at high rates
	// where a batch is due every few milliseconds) instead of losing that
	// rate; the price is that after an idle period the consumer may send
	// BurstWindow worth of messages at once.
	BurstWindow time.Duration
	// StoreReserve is kept free before a deadline for the store after
	// pacing, at least (Process also reserves the time its recent stores
	// took for as many messages); default 1 s.
	StoreReserve time.Duration
	// Breaker configures the circuit breaker on the destination.
	Breaker BreakerConfig
	// Inner, when set, runs the inner loop on the sink's store latency: it
	// may cut this consumer's pace below its share, never raise it
	// (InnerLoop). When nil, the consumer follows RATE: it runs the inner
	// loop with the settings RATE carries (the loop's PARAMS inner_loop)
	// while it carries them, and none otherwise.
	Inner *InnerConfig
}

func (c Config) withDefaults() Config {
	c.BatchSize = defaults.Positive(c.BatchSize, 10)
	c.MaxHold = defaults.Positive(c.MaxHold, 2*time.Second)
	c.BurstWindow = defaults.Positive(c.BurstWindow, 250*time.Millisecond)
	c.StoreTimeout = defaults.Positive(c.StoreTimeout, 30*time.Second)
	if c.Validate == nil {
		c.Validate = ValidJSON
	}
	c.StoreReserve = defaults.Positive(c.StoreReserve, time.Second)
	return c
}

// ValidJSON accepts a message whose body is a JSON object.
func ValidJSON(m Message) error {
	var v map[string]json.RawMessage
	if err := json.Unmarshal(m.Body, &v); err != nil {
		return fmt.Errorf("body is not a JSON object: %w", err)
	}
	return nil
}

// Report is what one batch came to. Every message of the batch is in
// exactly one of Stored, Retry, Deferred and Poison.
type Report struct {
	// Stored were taken by the sink: acknowledge them.
	Stored []Message
	// Retry were not stored because the destination failed (down, 5xx, a
	// timeout): give them back with a backoff that grows with their
	// deliveries (Retrier), so that an outage does not spend their delivery
	// budget faster than it lasts.
	Retry []Message
	// Deferred were not tried: their pacing slot did not come before the
	// deadline or shutdown, the rate is zero, or the circuit is open; or
	// the sink refused them as poison while it refused most recent messages
	// (a destination fault: held, not dead-lettered). Give them back;
	// DeferFor tells when a slot is expected.
	Deferred []Message
	// Poison must go to the dead-letter path with their reason.
	Poison []Poison
	// Cause is the destination's failure behind Retry ("" when none).
	Cause string
	// Outage is true when the Retry messages failed while the destination
	// failed as a whole (Breaker.Failing after the batch: an outage, a
	// brownout), not for a fault of their own: a source that bounds each
	// message's attempts does not count these (OutageRetrier).
	Outage bool
	// Paused is true when the rate was zero.
	Paused bool
	// DeferFor is how long until the Deferred messages may have a slot at
	// the current rate, or until the circuit half-opens, whichever is
	// later (0 when unknown or paused).
	DeferFor time.Duration
	// Working is the time the batch took without its pacing wait
	// (validation, the store): counted in Stats.AddBatch unless the batch
	// was deferred whole.
	Working time.Duration
}

// Consumer runs batches: read the allowed rate, pace, validate, store,
// acknowledge what was stored, release the rest, dead-letter the poison.
// The SQS Lambda calls Process with the batch it was handed; the worker and
// the demo call Run with a Source. A Consumer is one of the peers that
// share the loop's rate; it is safe for concurrent use, but concurrent
// callers share its one pacer.
type Consumer struct {
	cfg   Config
	rates *RateCache
	pacer *Pacer
	sink  Sink
	clock Clock
	log   *slog.Logger
	stats *Stats
	// breaker stops taking messages while the destination is down.
	breaker *Breaker
	// blame keeps a message's own failures off the breaker.
	blame blame
	// verdicts keeps poison that comes back off the breaker.
	verdicts verdicts
	// perMessage is the recent store time per message (ns, EWMA), for
	// the time reserved before a deadline.
	perMessage atomic.Int64
	// inner is the inner loop on the store latency; nil when off.
	inner *innerGuard
}

// New returns a Consumer. stats nil means the RateCache's counters (the
// usual choice: one Stats per consumer); log may be nil.
func New(cfg Config, rates *RateCache, sink Sink, clock Clock, log *slog.Logger, stats *Stats) *Consumer {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if stats == nil {
		stats = rates.stats
	}
	return &Consumer{
		cfg:     cfg,
		rates:   rates,
		pacer:   NewPacer(clock, 0, cfg.BatchSize),
		sink:    sink,
		clock:   clock,
		log:     log,
		stats:   stats,
		breaker: NewBreaker(cfg.Breaker, clock),
		inner:   newInnerGuard(cfg.Inner, log),
	}
}

// Breaker returns the consumer's circuit breaker.
func (c *Consumer) Breaker() *Breaker { return c.breaker }

// Stats returns the consumer's counters.
func (c *Consumer) Stats() *Stats { return c.stats }

// Clock returns the clock the consumer runs on.
func (c *Consumer) Clock() Clock { return c.clock }

// Pacer returns the consumer's pacer.
func (c *Consumer) Pacer() *Pacer { return c.pacer }

// refresh reads the allowed rate (cached) and sets the pacer to this
// consumer's share.
func (c *Consumer) refresh(ctx context.Context) Allowed {
	a := c.rates.Allowed(ctx)
	a.Share = c.inner.pace(c.clock.Now(), a, c.stats)
	return sharePace(a, c.pacer, c.cfg.BatchSize, c.cfg.BurstWindow)
}

// ReceiveSize is how many messages to receive now: BatchSize, or fewer at a
// low rate so that a batch waits at most MaxHold for its pacing slot.
func (c *Consumer) ReceiveSize(ctx context.Context) int {
	if c.breaker.Probing() {
		return 1
	}
	if unpaced.From(ctx) { // the benchmarks' measure of what pacing costs
		return c.cfg.BatchSize
	}
	a := c.refresh(ctx)
	if math.IsInf(a.Share, 1) {
		return c.cfg.BatchSize
	}
	n := int(a.Share * c.cfg.MaxHold.Seconds())
	return min(max(n, 1), c.cfg.BatchSize)
}

// Process runs one batch that was already received: validate, pace, store.
// It does not talk to the source; the caller acknowledges, releases and
// dead-letters by the Report.
//
// Without a deadline on ctx (the worker), Process waits for the batch's
// pacing slot, also while the rate is zero; when ctx ends meanwhile, the
// batch comes back in Report.Deferred. With a deadline (a Lambda
// invocation), it never waits past it: it stores the part of the batch whose
// slot comes early enough to be stored by the deadline (reserving
// StoreReserve plus the recent store time per message) and defers the rest
// at once; at a rate of zero, or while the circuit is open, it defers the
// whole batch at once. A batch whose slot came is stored even if ctx is
// cancelled meanwhile (shutdown), bounded by StoreTimeout and by ctx's
// deadline.
func (c *Consumer) Process(ctx context.Context, msgs []Message) Report {
	var rep Report
	start := c.clock.Now()
	var paced time.Duration
	c.stats.Consumed.Add(int64(len(msgs)))
	valid := c.validate(msgs, &rep)
	switch {
	case len(valid) == 0:
	case c.breaker.State() == CircuitOpen && !isNow(ctx):
		// The lease stays live (the rate's read renews it): leases at
		// work that store nothing tell the controller of an outage.
		c.refresh(ctx)
		rep.Deferred, rep.DeferFor = valid, c.breaker.Wait()
	default:
		n, err := c.pace(ctx, len(valid), &rep)
		paced = c.clock.Now().Sub(start)
		if err != nil {
			c.log.InfoContext(ctx, "pacing cut short; deferring batch", "messages", len(valid)-n, "err", err)
		}
		if n > 0 {
			c.store(ctx, valid[:n], &rep)
		}
		if n < len(valid) {
			rep.Deferred = append(rep.Deferred, valid[n:]...)
			if r := c.pacer.Rate(); r > 0 && !math.IsInf(r, 1) && !rep.Paused {
				rep.DeferFor = max(rep.DeferFor, time.Duration(float64(len(valid)-n)/r*float64(time.Second)))
			}
		}
	}
	rep.Outage = len(rep.Retry) > 0 && c.breaker.Failing()
	c.stats.count(rep)
	rep.Working = max(c.clock.Now().Sub(start)-paced, 0)
	if settled := len(msgs) - len(rep.Deferred); settled > 0 {
		c.stats.AddBatch(settled, rep.Working)
	}
	c.stats.setCircuit(c.breaker.State())
	return rep
}

// nowKey marks the context of ProcessNow.
type nowKey struct{}

// ProcessNow is Process without waiting for the batch's pacing slots: they
// are reserved at once (the batches after it wait for them, so the rate
// holds over time) and the batch is stored at once, before ctx's deadline
// or not, and also while the circuit is open: the batch is then a probe
// (stored, it closes the circuit; failed, it counts as a failure). At a
// rate of zero the batch is deferred as by Process. The SQS Lambda uses
// it for the messages a deferral would dead-letter, those on their last
// receives (the queue's maxReceiveCount): a few messages stored ahead of
// the rate cost the destination less than a healthy message lost to the
// dead-letter queue.
func (c *Consumer) ProcessNow(ctx context.Context, msgs []Message) Report {
	return c.Process(context.WithValue(ctx, nowKey{}, true), msgs)
}

// isNow reports whether ctx is ProcessNow's.
func isNow(ctx context.Context) bool {
	now, _ := ctx.Value(nowKey{}).(bool)
	return now
}

// validate moves malformed messages to rep.Poison and returns the others.
func (c *Consumer) validate(msgs []Message, rep *Report) []Message {
	valid := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if err := c.cfg.Validate(m); err != nil {
			rep.Poison = append(rep.Poison, Poison{Message: m, Reason: fmt.Sprintf("malformed payload: %v", err)})
			continue
		}
		valid = append(valid, m)
	}
	return valid
}

// pace waits until messages may go and returns how many of n may: all of
// them without a deadline (after waiting as long as it takes, re-reading
// the rate every cache period while it is zero), or the part that fits
// before ctx's deadline.
func (c *Consumer) pace(ctx context.Context, n int, rep *Report) (int, error) {
	if unpaced.From(ctx) {
		return n, nil
	}
	if isNow(ctx) {
		c.refresh(ctx)
		_, err := c.pacer.Delay(n)
		if errors.Is(err, ErrPaused) {
			rep.Paused = true
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		return n, nil
	}
	start := c.clock.Now()
	defer func() { c.stats.addPaced(c.clock.Now().Sub(start)) }()
	if dl, ok := ctx.Deadline(); ok {
		return c.paceBy(ctx, n, dl, rep)
	}
	for {
		c.refresh(ctx)
		err := c.pacer.Wait(ctx, n)
		if !errors.Is(err, ErrPaused) {
			if err != nil {
				return 0, err
			}
			return n, nil
		}
		rep.Paused = true
		if err := c.clock.Sleep(ctx, c.rates.Period()); err != nil {
			return 0, err
		}
	}
}

// paceBy lets through the part of n messages that can be paced and stored
// before dl, and returns at once with none at a rate of zero. It waits in
// slices of at most one rate period and re-reads the rate after each: a
// share that rises while it waits (the controller's next rate, or fewer
// peers once the event source mapping scaled down) shortens the wait, and a
// pause hands the batch back at once, instead of sleeping, billed, to a slot
// computed from a stale share.
func (c *Consumer) paceBy(ctx context.Context, n int, dl time.Time, rep *Report) (int, error) {
	per := time.Duration(c.perMessage.Load())
	left := dl.Sub(c.clock.Now()) - c.cfg.StoreReserve
	if per > 0 {
		n = min(n, max(int(left/per), 0))
	}
	if n == 0 {
		return 0, nil
	}
	by := dl.Add(-c.cfg.StoreReserve - per*time.Duration(n))
	for {
		c.refresh(ctx)
		k, done, err := c.pacer.waitSlice(ctx, n, by, c.rates.Period())
		if errors.Is(err, ErrPaused) {
			rep.Paused = true
			return 0, nil
		}
		if done || err != nil {
			return k, err
		}
	}
}

// store stores msgs and sorts them into rep; it tells the breaker whether
// the destination worked.
func (c *Consumer) store(ctx context.Context, msgs []Message, rep *Report) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.StoreTimeout)
	defer cancel()
	if dl, ok := ctx.Deadline(); ok {
		var cancelDL context.CancelFunc
		sctx, cancelDL = context.WithDeadline(sctx, dl)
		defer cancelDL()
	}
	start := c.clock.Now()
	res, err := c.sink.Store(sctx, msgs)
	c.observeStore(c.clock.Now().Sub(start), len(msgs))
	c.inner.observe(c.clock.Now(), len(msgs), c.clock.Now().Sub(start), res, err)
	if err == nil && len(res) != len(msgs) {
		err = fmt.Errorf("sink returned %d results for %d messages", len(res), len(msgs))
	}
	if err != nil {
		c.log.WarnContext(ctx, "store failed; retrying the batch later", "messages", len(msgs), "err", err)
		rep.Retry, rep.Cause = append(rep.Retry, msgs...), err.Error()
		c.failed(ctx, msgs)
		return
	}
	stored, poisoned := len(rep.Stored), len(rep.Poison)
	waiting := sortResults(msgs, res, rep)
	if len(rep.Stored) == stored && len(rep.Retry) > 0 && len(rep.Retry) == len(msgs) && waiting < len(msgs) {
		c.failed(ctx, msgs)
		return
	}
	c.judge(ctx, len(rep.Stored)-stored, waiting, poisoned, rep)
	c.blame.note(rep.Stored[stored:], rep.Retry)
}

// sortResults sorts msgs into rep by the sink's results and returns how
// many of those retryable were Waiting.
func sortResults(msgs []Message, res []Result, rep *Report) int {
	waiting := 0
	for i, r := range res {
		if r.Outcome == Retryable && r.Waiting {
			waiting++
		}
		switch r.Outcome {
		case Stored:
			rep.Stored = append(rep.Stored, msgs[i])
		case Permanent:
			rep.Poison = append(rep.Poison, Poison{Message: msgs[i], Reason: r.Reason})
		default:
			rep.Retry = append(rep.Retry, msgs[i])
			if rep.Cause == "" {
				rep.Cause = r.Reason
			}
		}
	}
	return waiting
}

// judge tells the breaker what the destination did with a batch it did not
// fail whole: stored messages, rep.Retry, and the poison from rep.Poison[from:]
// (the sink's; those before are malformed payloads, no answer of the
// destination; waiting of rep.Retry wait for other messages, and count as
// neither stored nor failed). When most recent messages were refused as poison, the
// destination is at fault: the batch's refused messages are held
// (Deferred until the circuit half-opens) instead of dead-lettered.
// Refused messages judged poison before (verdicts: back because the
// dead-letter queue refused them) are poison again, and not counted.
func (c *Consumer) judge(ctx context.Context, stored, waiting, from int, rep *Report) {
	if k := c.verdicts.known(rep.Poison[from:]); k > 0 {
		c.log.InfoContext(ctx, "poison messages back (their dead-letter send failed before): dead-lettered again, not counted against the destination",
			"messages", k, "reason", rep.Poison[from].Reason)
		from += k
	}
	defer func() { c.verdicts.add(rep.Poison[from:]) }()
	refused := rep.Poison[from:]
	switch c.breaker.Observe(stored, len(rep.Retry)-waiting, len(refused)) {
	case TripFailing:
		c.log.WarnContext(ctx, "the destination fails most messages transiently; circuit open, messages are handed back untried until it half-opens",
			"window", c.breaker.cfg.Window, "cause", rep.Cause, "wait", c.breaker.Wait())
	case TripPoison:
		reason := ""
		if len(refused) > 0 {
			reason = refused[0].Reason
		}
		c.log.ErrorContext(ctx, "the destination refuses most messages as poison: a destination fault (a schema change, a proxy refusing all); messages are held, not dead-lettered",
			"window", c.breaker.cfg.Window, "held", len(refused), "reason", reason, "wait", c.breaker.Wait())
		for _, p := range refused {
			rep.Deferred = append(rep.Deferred, p.Message)
		}
		rep.Poison = rep.Poison[:from]
		rep.DeferFor = max(rep.DeferFor, c.breaker.Wait())
	default:
		c.holdSuspect(ctx, stored, from, rep)
	}
}

// suspectPoison is the fewest refused messages of one batch that may be
// the destination's fault although the window does not say so yet (half
// a batch of 10); fewer are their messages' fault.
const suspectPoison = 5

// holdSuspect holds the refused messages of a batch mostly refused (at
// least suspectPoison, more than PoisonRatio of the messages the
// destination answered) that are on their first delivery: a destination
// that starts refusing everything crosses the window's PoisonRatio only
// after two or three such batches, which were dead-lettered. Delivered
// again, they are judged as any: by then the window tells a destination
// refusing all (held) from a burst of poison (dead-lettered once).
func (c *Consumer) holdSuspect(ctx context.Context, stored, from int, rep *Report) {
	refused := rep.Poison[from:]
	answered := stored + len(rep.Retry) + len(refused)
	if len(refused) < suspectPoison || float64(len(refused)) <= c.breaker.cfg.PoisonRatio*float64(answered) {
		return
	}
	keep := rep.Poison[:from:from]
	held := 0
	for _, p := range refused {
		if p.Message.ReceiveCount == 1 {
			rep.Deferred = append(rep.Deferred, p.Message)
			held++
		} else {
			keep = append(keep, p)
		}
	}
	rep.Poison = keep
	if held > 0 {
		c.log.WarnContext(ctx, "the destination refused most of a batch: held on first delivery in case it is the destination's fault (a schema change, a proxy refusing all), judged again when delivered again",
			"held", held, "reason", refused[0].Reason)
	}
}

// failed records a batch that the destination failed whole: against the
// destination (the breaker), unless every message in it failed before while
// the destination took others (see blame). A failed half-open probe always
// counts: the circuit is open for the destination's sake (the ratio rules
// open it while the destination takes some), and a probe that did not
// count would leave it half-open, probing without a backoff.
func (c *Consumer) failed(ctx context.Context, msgs []Message) {
	if !c.breaker.Probing() && c.blame.theirs(msgs) {
		c.log.InfoContext(ctx, "messages failing on their own while the destination takes others; circuit unchanged", "messages", len(msgs))
	} else {
		c.breaker.Note(len(msgs))
		c.breaker.Failure()
	}
	c.blame.note(nil, msgs)
}

// observeStore folds one store's time per message into the running
// estimate (an exponentially weighted mean, weight 0.3 for the newest).
func (c *Consumer) observeStore(d time.Duration, n int) {
	if n <= 0 || d <= 0 {
		return
	}
	sample := int64(d) / int64(n)
	old := c.perMessage.Load()
	if old == 0 {
		c.perMessage.Store(sample)
		return
	}
	c.perMessage.Store((7*old + 3*sample) / 10)
}

// Settle tells src the fate of a processed batch: Ack the stored,
// dead-letter the poison (or release them when src is no DeadLetterer, so
// that its redrive policy moves them), give back the Retry ones with the
// source's backoff (Retrier; else released) and release the Deferred ones.
// It runs on a context that outlives ctx's cancellation (bounded by
// StoreTimeout), so that shutdown does not leave a stored batch
// unacknowledged.
func (c *Consumer) Settle(ctx context.Context, src Source, rep Report) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.StoreTimeout)
	defer cancel()
	var errs []error
	if len(rep.Stored) > 0 {
		if err := src.Ack(sctx, rep.Stored); err != nil {
			errs = append(errs, fmt.Errorf("ack %d stored messages: %w", len(rep.Stored), err))
		}
	}
	release := rep.Deferred
	if len(rep.Poison) > 0 {
		for _, p := range rep.Poison {
			c.log.WarnContext(ctx, "poison message", "id", p.Message.ID, "reason", p.Reason, "receive_count", p.Message.ReceiveCount)
		}
		if dl, ok := src.(DeadLetterer); ok {
			if err := dl.DeadLetter(sctx, rep.Poison); err != nil {
				errs = append(errs, fmt.Errorf("dead-letter %d messages: %w", len(rep.Poison), err))
			}
		} else {
			for _, p := range rep.Poison {
				release = append(release, p.Message)
			}
		}
	}
	if len(rep.Retry) > 0 {
		if err := retry(sctx, src, rep); err != nil {
			errs = append(errs, fmt.Errorf("retry %d messages later: %w", len(rep.Retry), err))
		}
		if _, ok := src.(Retrier); !ok {
			release = append(release, rep.Retry...)
		}
	}
	if len(release) > 0 {
		if err := src.Release(sctx, release); err != nil {
			errs = append(errs, fmt.Errorf("release %d messages: %w", len(release), err))
		}
	}
	return errors.Join(errs...)
}

// retry gives rep.Retry back to src with its backoff: RetryOutage when
// they failed with the whole destination and src tells those apart, else
// Retry; nothing when src is no Retrier (the caller releases them).
func retry(ctx context.Context, src Source, rep Report) error {
	if o, ok := src.(OutageRetrier); ok && rep.Outage {
		return o.RetryOutage(ctx, rep.Retry, rep.Cause)
	}
	if r, ok := src.(Retrier); ok {
		return r.Retry(ctx, rep.Retry, rep.Cause)
	}
	return nil
}

// paused waits one rate period without receiving while the allowed rate
// is zero (the loop is paused), and reports whether it did: a worker then
// holds no message (an SQS message held through a long pause would count a
// receive at every visibility timeout) and keeps its lease.
func (c *Consumer) paused(ctx context.Context) bool {
	if unpaced.From(ctx) || c.refresh(ctx).Share != 0 {
		return false
	}
	start := c.clock.Now()
	_ = c.clock.Sleep(ctx, c.rates.Period()) // ctx's end ends Run's loop
	c.stats.addPaced(c.clock.Now().Sub(start))
	return true
}

// Run consumes src until ctx ends: receive (ReceiveSize messages), Process,
// Settle. While the allowed rate is zero it receives nothing. After a batch the destination failed it waits the breaker's
// backoff before it receives again; once the circuit is open it takes no
// messages until the backoff has passed, then probes with one. On shutdown
// it settles the batch it holds (stored ones acked, the rest released) and
// returns nil. Source errors are logged and retried with the same backoff.
func (c *Consumer) Run(ctx context.Context, src Source) error {
	receiveFailures := 0
	for ctx.Err() == nil {
		if d := c.breaker.Wait(); d > 0 {
			c.stats.setCircuit(c.breaker.State())
			c.log.InfoContext(ctx, "destination failing; waiting", "circuit", c.breaker.State().String(), "wait", d)
			if c.clock.Sleep(ctx, d) != nil {
				break
			}
			continue
		}
		if c.paused(ctx) {
			continue
		}
		msgs, err := src.Receive(ctx, c.ReceiveSize(ctx))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			receiveFailures++
			d := c.breaker.cfg.Backoff.EqualJitter(receiveFailures)
			c.log.WarnContext(ctx, "receive failed", "err", err, "retry_in", d)
			if c.clock.Sleep(ctx, d) != nil {
				break
			}
			continue
		}
		receiveFailures = 0
		if len(msgs) == 0 {
			continue
		}
		rep := c.Process(ctx, msgs)
		if err := c.Settle(ctx, src, rep); err != nil {
			c.log.ErrorContext(ctx, "settle batch", "err", err)
		}
	}
	return nil
}

// ErrCannotProbe is returned by Consumer.Probe when the sink has no Probe
// (it is not a Prober).
var ErrCannotProbe = errors.New("the sink cannot probe its destination (not a consume.Prober)")

// ProbeTimeout bounds Consumer.Probe: a destination that does not answer
// within it is down.
const ProbeTimeout = 5 * time.Second

// Probe checks the destination without storing anything (the sink's
// Probe, bounded by ProbeTimeout and StoreTimeout): nil when it is up. It
// leaves the circuit breaker alone: the next batch is what closes it.
func (c *Consumer) Probe(ctx context.Context) error {
	p, ok := c.sink.(Prober)
	if !ok {
		return ErrCannotProbe
	}
	pctx, cancel := context.WithTimeout(ctx, min(ProbeTimeout, c.cfg.StoreTimeout))
	defer cancel()
	return p.Probe(pctx)
}
