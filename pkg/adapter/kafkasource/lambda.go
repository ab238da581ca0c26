package kafkasource

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/recent"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// DeadLetterSender sends poison messages with their reasons to a
// dead-letter topic or queue and returns those it sent.
type DeadLetterSender interface {
	SendDeadLetters(ctx context.Context, poison []consume.Poison) ([]consume.Message, error)
}

// LambdaHandler is the consumer Lambda of a Kafka event source mapping
// (Amazon MSK or self-managed Kafka): one invocation is one batch of
// records, of one or more partitions, that the mapping's poller fetched.
//
// Lambda's Kafka mappings have no partial batch response: the offsets of
// the whole batch are committed when the invocation succeeds, and a failed
// invocation is retried with the whole batch. So Handle returns nil only
// when every record was stored or dead-lettered. At a rate of zero or
// while the destination's circuit is open it holds: it waits and tries
// again until PacingMargin before the deadline, instead of failing at
// once, so that a pause costs few retries of the mapping (each retry
// counts against MaximumRetryAttempts, and with an on-failure destination
// AWS skips the batch after 10). When the destination failed, when the
// pacing slot of some records did not come before the deadline (still
// paused, still open, a batch too large for the share and the timeout),
// or when a dead letter could not be sent, it returns an error after
// storing what it could; the idempotent sink
// absorbs the records stored twice, and the handler remembers the records
// it stored or dead-lettered (the last RememberStored of them, each by its
// cluster, topic, partition, offset and timestamp) so that the
// retry of the batch on this instance neither spends pacing slots on them
// nor sends a poison record to the dead-letter destination twice.
//
// Poison records (malformed value, refused for good by the sink) are sent
// by the handler to DeadLetters with their reason, and then count as done.
type LambdaHandler struct {
	Consumer *consume.Consumer
	// DeadLetters receives poison records; nil fails every invocation that
	// holds one (configure one).
	DeadLetters DeadLetterSender
	// IDHeader names the header carrying a producer-set message id
	// (default "message-id"); without it a record's id is its
	// topic/partition/offset.
	IDHeader string
	// PacingMargin is kept free before the invocation's deadline for
	// sending dead letters and answering (default 2 s).
	PacingMargin time.Duration
	// RememberStored bounds how many stored or dead-lettered records are
	// remembered across invocations (default 100,000).
	RememberStored int
	// HoldPoll is how often a batch held by a rate of zero or an open
	// circuit is tried again within the invocation (default
	// consume.DefaultRatePeriod).
	HoldPoll time.Duration
	Log      *slog.Logger
	// Metrics receives one CloudWatch Embedded Metric Format line per
	// invocation when non-nil (os.Stdout in Lambda): the SQS consumer's
	// metrics (consume.BatchMetrics) in Namespace (default
	// consume.DefaultNamespace).
	Metrics   io.Writer
	Namespace string
	Loop      string

	mu sync.Mutex
	// stored holds the records stored or dead-lettered (remember).
	stored *recent.Map[string, struct{}]
	// seen counts the deliveries of the records handed to the sink, so
	// that the mapping's retry of a failed batch hands the sink their
	// delivery and first time (deliver).
	seen *recent.Map[string, delivery]
}

// ErrNotAllStored is wrapped by the error Handle returns when some records
// are neither stored nor dead-lettered: the mapping retries the batch.
var ErrNotAllStored = errors.New("records not stored; the batch is retried")

// LambdaRecord converts a record of a Lambda Kafka event (base64 key and
// value, headers as lists of byte values) to a franz-go record.
func LambdaRecord(r events.KafkaRecord) (*kgo.Record, error) {
	rec := &kgo.Record{Topic: r.Topic, Partition: int32(r.Partition), Offset: r.Offset, Timestamp: r.Timestamp.Time}
	var err error
	if r.Key != "" {
		if rec.Key, err = base64.StdEncoding.DecodeString(r.Key); err != nil {
			return rec, fmt.Errorf("record %s: key is not base64: %w", Origin(rec), err)
		}
	}
	if rec.Value, err = base64.StdEncoding.DecodeString(r.Value); err != nil {
		return rec, fmt.Errorf("record %s: value is not base64: %w", Origin(rec), err)
	}
	for _, h := range r.Headers {
		keys := make([]string, 0, len(h))
		for k := range h {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(h[k])})
		}
	}
	return rec, nil
}

// EventMessages returns the messages of ev in a stable order (partitions by
// name, records by offset), each with its *kgo.Record as Handle; a record
// that cannot be decoded is returned as poison.
func EventMessages(ev events.KafkaEvent, idHeader string) ([]consume.Message, []consume.Poison) {
	if idHeader == "" {
		idHeader = "message-id"
	}
	parts := make([]string, 0, len(ev.Records))
	for p := range ev.Records {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	var msgs []consume.Message
	var poison []consume.Poison
	for _, p := range parts {
		recs := slices.Clone(ev.Records[p])
		slices.SortFunc(recs, func(a, b events.KafkaRecord) int { return int(a.Offset - b.Offset) })
		for _, r := range recs {
			rec, err := LambdaRecord(r)
			m := RecordMessage(rec, idHeader)
			m.Handle = rec
			if err != nil {
				poison = append(poison, consume.Poison{Message: m, Reason: "malformed payload: " + err.Error()})
				continue
			}
			msgs = append(msgs, m)
		}
	}
	return msgs, poison
}

// Handle processes one Kafka event; see LambdaHandler.
func (h *LambdaHandler) Handle(ctx context.Context, ev events.KafkaEvent) error {
	log := h.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	msgs, undecodable := EventMessages(ev, h.IDHeader)
	src := eventSource(ev)
	todo, already := h.deliver(src, msgs)
	undecodable = h.notDonePoison(src, undecodable)
	pctx, cancel := h.pacingContext(ctx)
	defer cancel()
	paced := h.Consumer.Stats().Paced()
	rep := h.process(pctx, src, todo)
	paced = h.Consumer.Stats().Paced() - paced
	poison := append(undecodable, rep.Poison...)
	sent, refused, dlErr := h.deadLetter(ctx, log, src, poison)
	total, share, fallback := h.Consumer.Stats().AllowedRate()
	log.InfoContext(ctx, "batch", "loop", h.Loop, "records", len(msgs)+len(undecodable), "stored", len(rep.Stored),
		"already_done", already, "retry", len(rep.Retry), "deferred", len(rep.Deferred), "paused", rep.Paused,
		"poison", len(poison), "dead_lettered", sent, "dead_letter_refused", refused, "allowed_rate", total, "share", share, "rate_fallback", fallback)
	if h.Metrics != nil {
		rep.Poison = poison
		m := consume.BatchMetrics{Loop: h.Loop, Consumed: len(msgs) + len(undecodable), Report: rep, DeadLettered: sent, DeadLetterRefused: refused, Paced: paced,
			Stats: h.Consumer.Stats()}
		if err := m.WriteEMF(h.Metrics, h.Namespace); err != nil {
			log.WarnContext(ctx, "metrics", "err", err)
		}
	}
	return outcome(rep, h.Consumer.Breaker().State() == consume.CircuitOpen, len(poison)-sent, dlErr)
}

// process runs msgs through the consumer in chunks of its ReceiveSize (the
// batch size, fewer at a low rate), so that a batch of thousands of
// records goes to the destination at the paced rate and not as one burst
// once the last slot came. A chunk deferred because the rate is zero or
// the circuit is open is held: tried again after a wait (hold) until ctx,
// the pacing context, ends. After a chunk is deferred for good (the
// deadline) the rest is deferred without trying.
func (h *LambdaHandler) process(ctx context.Context, src string, msgs []consume.Message) consume.Report {
	var rep consume.Report
	for len(msgs) > 0 {
		n := min(max(h.Consumer.ReceiveSize(ctx), 1), len(msgs))
		r := h.Consumer.Process(ctx, msgs[:n])
		h.remember(src, r.Stored)
		rep.Stored = append(rep.Stored, r.Stored...)
		rep.Poison = append(rep.Poison, r.Poison...)
		rep.Paused = rep.Paused || r.Paused
		if r.Cause != "" {
			rep.Cause = r.Cause
		}
		if len(r.Retry) > 0 && r.Outage && h.hold(ctx, r) {
			// The destination fails as a whole (an outage, a brownout):
			// each failed invocation is a retry of the mapping, so the
			// chunk is tried again within this one.
			msgs = append(append(append([]consume.Message{}, r.Retry...), r.Deferred...), msgs[n:]...)
			continue
		}
		rep.Retry = append(rep.Retry, r.Retry...)
		if len(r.Deferred) > 0 && h.hold(ctx, r) {
			// Waiting is safe: the chunk is tried again, still within the
			// invocation's deadline.
			msgs = append(r.Deferred, msgs[n:]...)
			continue
		}
		msgs = msgs[n:]
		rep.Deferred = append(rep.Deferred, r.Deferred...)
		if len(r.Deferred) > 0 {
			rep.Deferred = append(rep.Deferred, msgs...)
			break
		}
	}
	return rep
}

// hold waits before a chunk of r is tried again, and reports whether it
// should be: only when the rate is zero, the circuit is open or the chunk
// failed with the whole destination (r.Outage; a deferral for want of time
// is final) and ctx has a deadline, for HoldPoll or the circuit's
// remaining wait (at least the breaker's backoff after a failure), and
// never past ctx.
func (h *LambdaHandler) hold(ctx context.Context, r consume.Report) bool {
	br := h.Consumer.Breaker()
	open := br.State() == consume.CircuitOpen
	outage := r.Outage && len(r.Retry) > 0
	dl, ok := ctx.Deadline()
	if !ok || (!r.Paused && !open && !outage) {
		return false // without a deadline, nothing bounds the hold
	}
	wait := defaults.Positive(h.HoldPoll, consume.DefaultRatePeriod)
	if open && r.DeferFor > 0 {
		wait = min(wait, r.DeferFor)
	}
	if outage {
		wait = max(wait, br.Wait())
	}
	if time.Until(dl) <= wait {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// outcome is the invocation's error: nil when nothing is left over.
// circuitOpen tells why records were deferred when the rate was not zero.
func outcome(rep consume.Report, circuitOpen bool, unsent int, dlErr error) error {
	var why []string
	if len(rep.Retry) > 0 {
		why = append(why, fmt.Sprintf("%d failed at the destination (%s)", len(rep.Retry), rep.Cause))
	}
	if len(rep.Deferred) > 0 {
		cause := "no pacing slot before the deadline"
		switch {
		case rep.Paused:
			cause = "allowed rate is zero"
		case circuitOpen:
			cause = "the destination's circuit is open"
		}
		why = append(why, fmt.Sprintf("%d deferred (%s)", len(rep.Deferred), cause))
	}
	if unsent > 0 {
		why = append(why, fmt.Sprintf("%d poison not dead-lettered", unsent))
	}
	if len(why) == 0 {
		return nil
	}
	err := fmt.Errorf("%w: %s", ErrNotAllStored, strings.Join(why, "; "))
	if dlErr != nil {
		err = fmt.Errorf("%w: %w", err, dlErr)
	}
	return err
}

// pacingContext ends PacingMargin before ctx's deadline, if it has one.
func (h *LambdaHandler) pacingContext(ctx context.Context) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !ok {
		return context.WithCancel(ctx)
	}
	margin := defaults.Positive(h.PacingMargin, 2*time.Second)
	return context.WithDeadline(ctx, dl.Add(-margin))
}

// deadLetter sends the poison records and returns how many went and how
// many sends of a record the destination refused. A refusal is tried
// again after HoldPoll, within the invocation, until PacingMargin/4
// before its deadline: the mapping's retries of the batch are few with
// an on-failure destination (after them AWS skips the batch, and the
// poison with it), so a dead-letter topic refusing for a while must not
// spend one per refusal. Without a deadline it is tried once.
func (h *LambdaHandler) deadLetter(ctx context.Context, log *slog.Logger, src string, poison []consume.Poison) (sent, refused int, err error) {
	if len(poison) == 0 {
		return 0, 0, nil
	}
	for _, p := range poison {
		log.WarnContext(ctx, "poison record", "id", p.Message.ID, "reason", p.Reason)
	}
	if h.DeadLetters == nil {
		return 0, 0, errors.New("no dead-letter destination configured")
	}
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl.Add(-defaults.Positive(h.PacingMargin, 2*time.Second)/4))
		defer cancel()
	}
	wait := defaults.Positive(h.HoldPoll, consume.DefaultRatePeriod)
	for {
		ok, serr := h.DeadLetters.SendDeadLetters(ctx, poison)
		h.remember(src, ok)
		sent += len(ok)
		poison = h.notDonePoison(src, poison)
		if len(poison) == 0 {
			return sent, refused, nil
		}
		refused += len(poison)
		err = fmt.Errorf("send dead letters: %w", errors.Join(serr, fmt.Errorf("%d not sent", len(poison))))
		dl, has := ctx.Deadline()
		if !has || time.Until(dl) <= wait {
			log.ErrorContext(ctx, "dead-letter destination refused records; the batch is retried", "refused", refused, "err", err)
			return sent, refused, err
		}
		log.ErrorContext(ctx, "dead-letter destination refused records; trying again within the invocation", "records", len(poison), "err", err)
		if (consume.WallClock{}).Sleep(ctx, wait) != nil {
			return sent, refused, err
		}
	}
}

// notDonePoison drops the poison this instance dead-lettered before.
func (h *LambdaHandler) notDonePoison(src string, poison []consume.Poison) []consume.Poison {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stored == nil {
		return poison
	}
	var out []consume.Poison
	for _, p := range poison {
		if !h.stored.Has(identity(src, p.Message)) {
			out = append(out, p)
		}
	}
	return out
}

// remember records stored or dead-lettered messages for deliver and
// notDonePoison.
func (h *LambdaHandler) remember(src string, msgs []consume.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stored == nil {
		h.stored = recent.New[string, struct{}](defaults.Positive(h.RememberStored, 100_000))
	}
	for _, m := range msgs {
		h.stored.Put(identity(src, m), struct{}{})
	}
}

// deliver drops the messages this instance stored or dead-lettered before
// (a retried batch), sets the delivery of the others and returns them and
// how many it dropped. A message's delivery is the first (ReceiveCount 1,
// FirstReceivedAt now) for a record this instance has not seen, else one
// more than the last, with the first's time. A Kafka mapping retries a
// failed batch whole, as first deliveries: without the count, a sink that
// bounds its retries by delivery (a missing parent row) would wait for
// ever, and the mapping discard the batch after its retries.
func (h *LambdaHandler) deliver(src string, msgs []consume.Message) ([]consume.Message, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = recent.New[string, delivery](defaults.Positive(h.RememberStored, 100_000))
	}
	now := time.Now()
	out := msgs[:0:0]
	for _, m := range msgs {
		id := identity(src, m)
		if h.stored != nil && h.stored.Has(id) {
			continue
		}
		d, ok := h.seen.Get(id)
		if !ok {
			d.first = now
		}
		d.n++
		h.seen.Put(id, d)
		m.ReceiveCount, m.FirstReceivedAt = d.n, d.first
		out = append(out, m)
	}
	return out, len(msgs) - len(out)
}

// delivery is what the handler remembers of a record's deliveries: how
// many, and when the first came.
type delivery struct {
	n     int
	first time.Time
}

// eventSource names the cluster of ev: its event source ARN (an MSK
// cluster, a self-managed mapping), else its bootstrap servers.
func eventSource(ev events.KafkaEvent) string {
	if ev.EventSourceARN != "" {
		return ev.EventSourceARN
	}
	return ev.BootstrapServers
}

// identity names a record in the "already stored" memory: its cluster
// (src), topic/partition/offset and timestamp. The cluster tells apart two
// clusters with the same topic (a migration to MSK); the timestamp tells
// apart a recreated topic's record from the one stored at the same offset
// before. Two records sharing a producer-set id stay apart.
func identity(src string, m consume.Message) string {
	if r, ok := m.Handle.(*kgo.Record); ok {
		return src + "|" + Origin(r) + "@" + strconv.FormatInt(r.Timestamp.UnixMilli(), 10)
	}
	return src + "|" + m.ID
}

// TopicDeadLetters produces poison records to a dead-letter topic with
// their reason, origin and id in headers (see DeadRecord), and waits for the
// broker's acknowledgement. A dead letter the topic refuses as too large is
// sent again with its value cut (CutDeadRecord), as by Source.
type TopicDeadLetters struct {
	Client *kgo.Client
	// Topic is the dead-letter topic; "" means "<record's topic>.dlt".
	Topic string
	// Timeout bounds one send (default 10 s): franz-go retries retriable
	// refusals without limit, and the handler, which tries a refused send
	// again within the invocation, counts each timeout as a refusal (franz-go
	// fails a record only when it tries it again, after a metadata
	// refresh, at most every 5 s by default).
	Timeout time.Duration
	// Log receives a warning for each dead letter sent cut; nil discards.
	Log *slog.Logger
}

var _ DeadLetterSender = TopicDeadLetters{}

// SendDeadLetters produces the poison records and returns those the broker
// took.
func (t TopicDeadLetters) SendDeadLetters(ctx context.Context, poison []consume.Poison) ([]consume.Message, error) {
	recs := make([]*kgo.Record, len(poison))
	for i, p := range poison {
		r, ok := p.Message.Handle.(*kgo.Record)
		if !ok {
			r = &kgo.Record{Topic: p.Message.Attributes["kafka.topic"], Value: p.Message.Body}
		}
		recs[i] = DeadRecord(r, t.Topic, p.Message.ID, p.Reason)
	}
	var sent []consume.Message
	var errs []error
	for i, res := range produceDead(ctx, t.Client, defaults.Positive(t.Timeout, 10*time.Second), recs) {
		if res.err != nil {
			errs = append(errs, fmt.Errorf("produce %s to %s (%s): %w", poison[i].Message.ID, recs[i].Topic, deadLetterKind(res.err), res.err))
			continue
		}
		if res.cut > 0 && t.Log != nil {
			t.Log.WarnContext(ctx, "dead letter too large for the dead-letter topic; sent with its value cut (the whole record stays at its origin until retention)",
				"id", poison[i].Message.ID, "topic", recs[i].Topic, "value_bytes", res.cut, "kept_bytes", TruncatedValueBytes)
		}
		sent = append(sent, poison[i].Message)
	}
	return sent, errors.Join(errs...)
}
