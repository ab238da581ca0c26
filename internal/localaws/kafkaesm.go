package localaws

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-dev/sluice/internal/defaults"
)

// KafkaPoller is the Kafka event source mapping (Amazon MSK or
// self-managed Kafka): a member of a consumer group that reads batches of
// records, invokes the function with each as one real KafkaEvent (records
// grouped by "topic-partition", base64 keys and values, headers as lists of
// byte values), and commits the batch's offsets only after the invocation
// succeeded. A failed invocation (a function error, a timeout) is retried
// with the same batch after RetryWait, and the partitions wait meanwhile,
// as Lambda does: there is no partial batch response.
//
// Retries follow AWS's rules for Kafka mappings: without an on-failure
// destination and without MaxRetries, a batch is retried until it
// succeeds. With an on-failure destination (OnFailure) and no MaxRetries,
// AWS retries at most DefaultDestinationRetries times. Once the retries
// ran out the batch is discarded: committed past, reported with
// Discarded, and only its metadata (partitions and offsets, no record) is
// sent to OnFailure when there is one. The records themselves are gone.
//
// The client must be a consumer-group member with autocommit disabled and
// BlockRebalanceOnPoll (NewKafkaClient), so that a rebalance waits until
// the batch in flight is committed or discarded.
type KafkaPoller struct {
	Client  *kgo.Client
	Invoker Invoker
	// BatchSize is the largest batch (default 100, Lambda's default).
	BatchSize int
	// Window is how long a batch may wait to fill once its first record
	// came (MaximumBatchingWindowInSeconds; default 500 ms).
	Window time.Duration
	// RetryWait is the pause before a failed batch is invoked again
	// (default 1 s).
	RetryWait time.Duration
	// MaxRetries bounds the retries of a failed batch
	// (MaximumRetryAttempts); 0 is unlimited (Lambda's default for Kafka),
	// which becomes DefaultDestinationRetries when OnFailure is set.
	MaxRetries int
	// OnFailure is the mapping's on-failure destination: it gets the
	// metadata of each discarded batch. nil is none.
	OnFailure KafkaFailureDestination
	// EventSource is "aws:kafka" (MSK, the default) or "SelfManagedKafka";
	// SourceARN and BootstrapServers fill the event's fields.
	EventSource, SourceARN, BootstrapServers string
	// Enabled reports whether the mapping is enabled (MappingEnabled
	// reads the mapping's State). A disabled mapping polls nothing and
	// invokes nothing (the batch in flight finishes first), as AWS stops
	// a disabled mapping's pollers; it commits nothing, so it resumes from
	// the group's committed offsets. nil is always enabled; an error keeps
	// the last answer.
	Enabled func(ctx context.Context) (bool, error)
	// Every is how often Enabled is read (default
	// DefaultConcurrencyEvery).
	Every time.Duration
	Log   *slog.Logger
	// OnBatch, when set, sees every batch's outcome.
	OnBatch func(KafkaBatchResult)
}

// KafkaBatchResult is the outcome of one batch.
type KafkaBatchResult struct {
	// Records is the batch's size; Invocations how often it was invoked.
	Records, Invocations int
	// Origins are the records' topic/partition/offset.
	Origins []string
	// Committed is true when the batch's offsets were committed after a
	// successful invocation; Discarded when MaxRetries ran out.
	Committed, Discarded bool
	// LastErr is the last invocation's error (nil when it succeeded).
	LastErr error
}

// DefaultDestinationRetries is how many times AWS retries a failed Kafka
// batch when the mapping has an on-failure destination and unlimited
// retries (MaximumRetryAttempts -1).
const DefaultDestinationRetries = 10

// KafkaFailureDestination is a Kafka mapping's on-failure destination (an
// SQS queue, an SNS topic, S3 or a Kafka topic in AWS).
type KafkaFailureDestination interface {
	SendKafkaFailure(ctx context.Context, f KafkaFailure) error
}

// KafkaFailure is what an on-failure destination gets for a discarded
// batch: where the batch was and why it was dropped, as AWS's invocation
// record for SQS and SNS destinations holds, never the records.
type KafkaFailure struct {
	// Condition is why the batch was discarded ("RetryAttemptsExhausted").
	Condition string `json:"condition"`
	// ApproximateInvokeCount is how often the batch was invoked.
	ApproximateInvokeCount int `json:"approximateInvokeCount"`
	// ErrorMessage is the last invocation's error.
	ErrorMessage string `json:"errorMessage"`
	// BatchSize is the number of records discarded.
	BatchSize int `json:"batchSize"`
	// Partitions are the offsets discarded, by "topic-partition".
	Partitions map[string]KafkaOffsets `json:"partitions"`
	// EventSourceARN and BootstrapServers name the cluster.
	EventSourceARN   string `json:"eventSourceArn,omitempty"`
	BootstrapServers string `json:"bootstrapServers,omitempty"`
}

// KafkaOffsets is the first and last offset of a partition's records in a
// batch.
type KafkaOffsets struct {
	FirstOffset int64 `json:"firstOffset"`
	LastOffset  int64 `json:"lastOffset"`
}

// NewKafkaClient returns a consumer-group member for a KafkaPoller:
// autocommit off, rebalances blocked while a batch is in flight, reading
// from the earliest offset of a new group.
func NewKafkaClient(brokers []string, group string, topics []string, opts ...kgo.Opt) (*kgo.Client, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.SessionTimeout(10 * time.Second),
	}, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka client for group %s: %w", group, err)
	}
	return cl, nil
}

func (p *KafkaPoller) log() *slog.Logger {
	if p.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return p.Log
}

// Run polls until ctx ends, nothing while the mapping is disabled.
func (p *KafkaPoller) Run(ctx context.Context) error {
	if p.Client == nil || p.Invoker == nil {
		return fmt.Errorf("kafka poller: Client and Invoker must be set")
	}
	every := defaults.Positive(p.Every, DefaultConcurrencyEvery)
	on, readAt := true, time.Time{}
	for ctx.Err() == nil {
		if p.Enabled != nil && time.Since(readAt) >= every {
			if v, err := p.Enabled(ctx); err != nil {
				p.log().WarnContext(ctx, "read the mapping's state; keeping the last", "enabled", on, "err", err)
			} else {
				on = v
			}
			readAt = time.Now()
		}
		if !on {
			sleep(ctx, every)
			continue
		}
		if _, err := p.PollOnce(ctx); err != nil && ctx.Err() == nil {
			p.log().WarnContext(ctx, "kafka poll", "err", err)
			sleep(ctx, time.Second)
		}
	}
	return nil
}

// PollOnce reads one batch, invokes the function with it until it succeeds
// (or MaxRetries ran out, or ctx ends), then commits it. An empty poll
// returns a zero result.
func (p *KafkaPoller) PollOnce(ctx context.Context) (KafkaBatchResult, error) {
	defer p.Client.AllowRebalance()
	recs, err := p.poll(ctx)
	if err != nil || len(recs) == 0 {
		return KafkaBatchResult{}, err
	}
	res := KafkaBatchResult{Records: len(recs)}
	for _, r := range recs {
		res.Origins = append(res.Origins, fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset))
	}
	payload, err := json.Marshal(p.Event(recs))
	if err != nil {
		return res, fmt.Errorf("encode Kafka event: %w", err)
	}
	p.invoke(ctx, payload, &res)
	if res.Discarded {
		if err := p.sendFailure(ctx, recs, res); err != nil {
			// AWS commits past a discarded batch whether or not its
			// record reached the destination.
			p.log().ErrorContext(ctx, "on-failure destination", "records", res.Records, "err", err)
		}
	}
	if res.LastErr == nil || res.Discarded {
		if err := p.Client.CommitRecords(ctx, recs...); err != nil {
			p.report(res)
			return res, fmt.Errorf("commit %d records: %w", len(recs), err)
		}
		res.Committed = res.LastErr == nil
	}
	p.report(res)
	return res, nil
}

// invoke invokes until success, MaxRetries or the end of ctx.
func (p *KafkaPoller) invoke(ctx context.Context, payload []byte, res *KafkaBatchResult) {
	wait := defaults.Positive(p.RetryWait, time.Second)
	for {
		res.Invocations++
		_, res.LastErr = p.Invoker.Invoke(ctx, payload)
		if res.LastErr == nil || ctx.Err() != nil {
			return
		}
		if limit := p.retries(); limit > 0 && res.Invocations > limit {
			res.Discarded = true
			p.log().ErrorContext(ctx, "batch discarded after retries (on-failure destination)", "records", res.Records,
				"invocations", res.Invocations, "first", res.Origins[0], "err", res.LastErr)
			return
		}
		p.log().WarnContext(ctx, "invocation failed; retrying the batch", "records", res.Records,
			"invocations", res.Invocations, "err", res.LastErr)
		if sleep(ctx, wait) != nil {
			return
		}
	}
}

// retries is the retry limit AWS applies: MaxRetries, or
// DefaultDestinationRetries for unlimited retries with an on-failure
// destination; 0 is unlimited.
func (p *KafkaPoller) retries() int {
	if p.MaxRetries <= 0 && p.OnFailure != nil {
		return DefaultDestinationRetries
	}
	return max(p.MaxRetries, 0)
}

// sendFailure sends the metadata of the discarded batch recs to OnFailure.
func (p *KafkaPoller) sendFailure(ctx context.Context, recs []*kgo.Record, res KafkaBatchResult) error {
	if p.OnFailure == nil {
		return nil
	}
	f := KafkaFailure{Condition: "RetryAttemptsExhausted", ApproximateInvokeCount: res.Invocations, BatchSize: len(recs),
		Partitions: map[string]KafkaOffsets{}, EventSourceARN: p.SourceARN, BootstrapServers: p.BootstrapServers}
	if res.LastErr != nil {
		f.ErrorMessage = res.LastErr.Error()
	}
	for _, r := range recs {
		key := r.Topic + "-" + strconv.Itoa(int(r.Partition))
		o, ok := f.Partitions[key]
		if !ok {
			o = KafkaOffsets{FirstOffset: r.Offset, LastOffset: r.Offset}
		}
		o.FirstOffset, o.LastOffset = min(o.FirstOffset, r.Offset), max(o.LastOffset, r.Offset)
		f.Partitions[key] = o
	}
	return p.OnFailure.SendKafkaFailure(ctx, f)
}

// poll reads up to BatchSize records, waiting up to Window for the batch
// to fill once the first record came.
func (p *KafkaPoller) poll(ctx context.Context) ([]*kgo.Record, error) {
	size := defaults.Positive(p.BatchSize, 100)
	window := defaults.Positive(p.Window, 500*time.Millisecond)
	var recs []*kgo.Record
	var wctx context.Context = ctx
	for len(recs) < size {
		fs := p.Client.PollRecords(wctx, size-len(recs))
		if err := fetchErr(fs); err != nil {
			return recs, err
		}
		recs = append(recs, fs.Records()...)
		if wctx.Err() != nil || (fs.Empty() && len(recs) > 0) {
			break
		}
		if len(recs) > 0 && wctx == ctx {
			var cancel context.CancelFunc
			wctx, cancel = context.WithTimeout(ctx, window)
			defer cancel()
		}
	}
	return recs, nil
}

// fetchErr returns the first error of fs other than the end of the poll's
// context.
func fetchErr(fs kgo.Fetches) error {
	for _, e := range fs.Errors() {
		if errors.Is(e.Err, context.Canceled) || errors.Is(e.Err, context.DeadlineExceeded) {
			continue
		}
		if errors.Is(e.Err, kgo.ErrClientClosed) {
			return e.Err
		}
		return fmt.Errorf("fetch %s/%d: %w", e.Topic, e.Partition, e.Err)
	}
	return nil
}

// Event builds the KafkaEvent Lambda sends for recs.
func (p *KafkaPoller) Event(recs []*kgo.Record) events.KafkaEvent {
	ev := events.KafkaEvent{EventSource: p.EventSource, EventSourceARN: p.SourceARN, BootstrapServers: p.BootstrapServers,
		Records: map[string][]events.KafkaRecord{}}
	if ev.EventSource == "" {
		ev.EventSource = "aws:kafka"
	}
	for _, r := range recs {
		key := r.Topic + "-" + strconv.Itoa(int(r.Partition))
		ev.Records[key] = append(ev.Records[key], KafkaEventRecord(r))
	}
	return ev
}

// KafkaEventRecord encodes r as Lambda does.
func KafkaEventRecord(r *kgo.Record) events.KafkaRecord {
	kr := events.KafkaRecord{
		Topic: r.Topic, Partition: int64(r.Partition), Offset: r.Offset,
		Timestamp:     events.MilliSecondsEpochTime{Time: r.Timestamp},
		TimestampType: "CREATE_TIME",
		Value:         base64.StdEncoding.EncodeToString(r.Value),
		Headers:       []map[string]events.JSONNumberBytes{},
	}
	if r.Attrs.TimestampType() == 1 {
		kr.TimestampType = "LOG_APPEND_TIME"
	}
	if r.Key != nil {
		kr.Key = base64.StdEncoding.EncodeToString(r.Key)
	}
	for _, h := range r.Headers {
		kr.Headers = append(kr.Headers, map[string]events.JSONNumberBytes{h.Key: events.JSONNumberBytes(h.Value)})
	}
	return kr
}

func (p *KafkaPoller) report(res KafkaBatchResult) {
	p.log().Info("kafka batch", "records", res.Records, "invocations", res.Invocations, "committed", res.Committed,
		"discarded", res.Discarded, "partitions", partitions(res.Origins))
	if p.OnBatch != nil {
		p.OnBatch(res)
	}
}

// partitions lists the topic/partition of origins, once each.
func partitions(origins []string) string {
	seen := map[string]bool{}
	var out []string
	for _, o := range origins {
		tp := o[:strings.LastIndexByte(o, '/')]
		if !seen[tp] {
			seen[tp] = true
			out = append(out, tp)
		}
	}
	return strings.Join(out, ",")
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
