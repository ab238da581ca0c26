package consume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"
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
	// Unpaced removes pacing (no rate reads, no waiting). It exists to
	// measure what pacing costs (the overhead ratio of the consumer
	// benchmark); production consumers never set it.
	Unpaced bool
}

func (c Config) withDefaults() Config {
	if c.BatchSize <= 0 {
		c.BatchSize = 10
	}
	if c.MaxHold <= 0 {
		c.MaxHold = 2 * time.Second
	}
	if c.BurstWindow <= 0 {
		c.BurstWindow = 250 * time.Millisecond
	}
	if c.StoreTimeout <= 0 {
		c.StoreTimeout = 30 * time.Second
	}
	if c.Validate == nil {
		c.Validate = ValidJSON
	}
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
// exactly one of Stored, Retry and Poison.
type Report struct {
	// Stored were taken by the sink: acknowledge them.
	Stored []Message
	// Retry were not stored (sink failure, pacing cut short): release them.
	Retry []Message
	// Poison must go to the dead-letter path with their reason.
	Poison []Poison
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
		cfg:   cfg,
		rates: rates,
		pacer: NewPacer(clock, 0, cfg.BatchSize),
		sink:  sink,
		clock: clock,
		log:   log,
		stats: stats,
	}
}

// Stats returns the consumer's counters.
func (c *Consumer) Stats() *Stats { return c.stats }

// Pacer returns the consumer's pacer.
func (c *Consumer) Pacer() *Pacer { return c.pacer }

// refresh reads the allowed rate (cached) and sets the pacer to this
// consumer's share.
func (c *Consumer) refresh(ctx context.Context) Allowed {
	a := c.rates.Allowed(ctx)
	if a.Share != c.pacer.Rate() {
		c.pacer.SetRate(a.Share)
		burst := c.cfg.BatchSize
		if !math.IsInf(a.Share, 1) {
			burst = max(burst, int(math.Ceil(a.Share*c.cfg.BurstWindow.Seconds())))
		}
		c.pacer.SetBurst(burst)
	}
	return a
}

// ReceiveSize is how many messages to receive now: BatchSize, or fewer at a
// low rate so that a batch waits at most MaxHold for its pacing slot.
func (c *Consumer) ReceiveSize(ctx context.Context) int {
	if c.cfg.Unpaced {
		return c.cfg.BatchSize
	}
	a := c.refresh(ctx)
	if math.IsInf(a.Share, 1) {
		return c.cfg.BatchSize
	}
	n := int(a.Share * c.cfg.MaxHold.Seconds())
	return min(max(n, 1), c.cfg.BatchSize)
}

// pace waits until n messages may go; while the rate is zero it re-reads
// the rate every cache period.
func (c *Consumer) pace(ctx context.Context, n int) error {
	if c.cfg.Unpaced {
		return nil
	}
	for {
		c.refresh(ctx)
		err := c.pacer.Wait(ctx, n)
		if !errors.Is(err, ErrPaused) {
			return err
		}
		if err := c.clock.Sleep(ctx, c.rates.Period()); err != nil {
			return err
		}
	}
}

// Process runs one batch that was already received: validate, pace, store.
// It does not talk to the source; the caller acknowledges, releases and
// dead-letters by the Report. When ctx ends during pacing, the messages not
// yet stored come back in Report.Retry and no error is returned; a batch
// whose pacing slot came is stored even if ctx ends meanwhile (bounded by
// StoreTimeout).
func (c *Consumer) Process(ctx context.Context, msgs []Message) Report {
	var rep Report
	c.stats.Consumed.Add(int64(len(msgs)))
	valid := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		if err := c.cfg.Validate(m); err != nil {
			rep.Poison = append(rep.Poison, Poison{Message: m, Reason: fmt.Sprintf("malformed payload: %v", err)})
			continue
		}
		valid = append(valid, m)
	}
	if len(valid) > 0 {
		if err := c.pace(ctx, len(valid)); err != nil {
			c.log.InfoContext(ctx, "pacing cut short; releasing batch", "messages", len(valid), "err", err)
			rep.Retry = append(rep.Retry, valid...)
		} else {
			c.store(ctx, valid, &rep)
		}
	}
	c.stats.Stored.Add(int64(len(rep.Stored)))
	c.stats.Failed.Add(int64(len(rep.Retry)))
	c.stats.Poison.Add(int64(len(rep.Poison)))
	return rep
}

func (c *Consumer) store(ctx context.Context, msgs []Message, rep *Report) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.StoreTimeout)
	defer cancel()
	res, err := c.sink.Store(sctx, msgs)
	if err == nil && len(res) != len(msgs) {
		err = fmt.Errorf("sink returned %d results for %d messages", len(res), len(msgs))
	}
	if err != nil {
		c.log.WarnContext(ctx, "store failed; releasing batch", "messages", len(msgs), "err", err)
		rep.Retry = append(rep.Retry, msgs...)
		return
	}
	for i, r := range res {
		switch r.Outcome {
		case Stored:
			rep.Stored = append(rep.Stored, msgs[i])
		case Permanent:
			rep.Poison = append(rep.Poison, Poison{Message: msgs[i], Reason: r.Reason})
		default:
			rep.Retry = append(rep.Retry, msgs[i])
		}
	}
}

// Settle tells src the fate of a processed batch: Ack the stored, dead-letter
// the poison (or release them when src is no DeadLetterer, so that its
// redrive policy moves them), release the rest. It runs on a context that
// outlives ctx's cancellation (bounded by StoreTimeout), so that shutdown
// does not leave a stored batch unacknowledged.
func (c *Consumer) Settle(ctx context.Context, src Source, rep Report) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.StoreTimeout)
	defer cancel()
	var errs []error
	if len(rep.Stored) > 0 {
		if err := src.Ack(sctx, rep.Stored); err != nil {
			errs = append(errs, fmt.Errorf("ack %d stored messages: %w", len(rep.Stored), err))
		}
	}
	if len(rep.Poison) > 0 {
		for _, p := range rep.Poison {
			c.log.WarnContext(ctx, "poison message", "id", p.Message.ID, "reason", p.Reason, "receive_count", p.Message.ReceiveCount)
		}
		if dl, ok := src.(DeadLetterer); ok {
			if err := dl.DeadLetter(sctx, rep.Poison); err != nil {
				errs = append(errs, fmt.Errorf("dead-letter %d messages: %w", len(rep.Poison), err))
			}
		} else {
			ms := make([]Message, len(rep.Poison))
			for i, p := range rep.Poison {
				ms[i] = p.Message
			}
			rep.Retry = append(rep.Retry, ms...)
		}
	}
	if len(rep.Retry) > 0 {
		if err := src.Release(sctx, rep.Retry); err != nil {
			errs = append(errs, fmt.Errorf("release %d messages: %w", len(rep.Retry), err))
		}
	}
	return errors.Join(errs...)
}

// Run consumes src until ctx ends: receive (ReceiveSize messages), Process,
// Settle. On shutdown it settles the batch it holds (stored ones acked, the
// rest released) and returns nil. Source errors are logged and retried after
// a pause.
func (c *Consumer) Run(ctx context.Context, src Source) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		msgs, err := src.Receive(ctx, c.ReceiveSize(ctx))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			c.log.WarnContext(ctx, "receive failed", "err", err, "retry_in", backoff)
			if c.clock.Sleep(ctx, backoff) != nil {
				break
			}
			backoff = min(2*backoff, 5*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
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
