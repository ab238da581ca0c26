// Package doctor checks a deployed loop's configuration against the rules
// that keep throttling from dead-lettering healthy messages (AWS's own for
// SQS and Lambda) and the project's: each Finding says what is wrong and
// how to fix it. Facts come from the AWS APIs (Gather); each part is
// optional, and a rule runs when the facts it needs are there.
package doctor

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// Facts are what was read of a deployment; nil parts were not asked for.
type Facts struct {
	Queue      *Queue
	Function   *Function // the consumer function
	Mapping    *Mapping
	Loop       *Loop
	Controller *Function
	// Schedule is the controller's schedule period (rate(...)); 0 when
	// unknown.
	Schedule time.Duration
}

// Queue is an SQS queue and its dead-letter queue.
type Queue struct {
	URL        string
	Visibility time.Duration
	Retention  time.Duration
	// MaxReceive is the redrive policy's maxReceiveCount (0: no redrive
	// policy); DLQRetention the dead-letter queue's retention.
	MaxReceive   int
	DLQ          string
	DLQRetention time.Duration
}

// Function is a Lambda function.
type Function struct {
	Name    string
	Timeout time.Duration
	// Reserved is its reserved concurrency (nil: none).
	Reserved *int
	// SafeRate is its SLUICE_SAFE_RATE (nil: unset, the default 10).
	SafeRate *float64
}

// Mapping is an SQS event source mapping.
type Mapping struct {
	UUID string
	// MaxConcurrency is ScalingConfig.MaximumConcurrency (0: none).
	MaxConcurrency int
}

// Loop is a loop's parameters in force and the alarms that watch it.
type Loop struct {
	ID     string
	Params loop.Params
	Alarms []string
}

// Finding is one broken rule.
type Finding struct {
	Rule    string `json:"rule"`
	Problem string `json:"problem"`
	Fix     string `json:"fix"`
}

// MinMaxReceive is the least maxReceiveCount AWS recommends for a queue
// that a Lambda event source mapping reads: throttled batches return to
// the queue, and each receive counts.
const MinMaxReceive = 5

// rule is one check: it returns its findings, none when the facts it needs
// are missing.
type rule func(f Facts) []Finding

// Check runs every rule on f.
func Check(f Facts) []Finding {
	var out []Finding
	for _, r := range []rule{visibility, redrive, dlqRetention, concurrency, rateTTL, alarms, safeRate, controllerConcurrency} {
		out = append(out, r(f)...)
	}
	return out
}

func one(rule, problem, fix string) []Finding { return []Finding{{rule, problem, fix}} }

// visibility: the queue's visibility timeout is at least six times the
// function's timeout (AWS's rule for Lambda event source mappings).
func visibility(f Facts) []Finding {
	if f.Queue == nil || f.Function == nil || f.Queue.Visibility >= 6*f.Function.Timeout {
		return nil
	}
	return one("visibility-timeout", fmt.Sprintf("queue %s: VisibilityTimeout %v is less than 6 x function %s's timeout %v",
		f.Queue.URL, f.Queue.Visibility, f.Function.Name, f.Function.Timeout),
		fmt.Sprintf("aws sqs set-queue-attributes --queue-url %s --attributes VisibilityTimeout=%d", f.Queue.URL, int((6*f.Function.Timeout).Seconds())))
}

// longestHold is the longest a loop may hold its consumers back: its RATE
// expiring, its stale policy's grace and three ticks.
func longestHold(p loop.Params) time.Duration {
	return max(p.RateTTL, p.StaleAfter+p.Stale.Grace, 3*p.TickPeriod)
}

// redrive: a redrive policy whose maxReceiveCount covers the throttled
// receives (at least MinMaxReceive) and the longest hold the loop allows
// (maxReceiveCount x visibility timeout).
func redrive(f Facts) []Finding {
	q := f.Queue
	if q == nil {
		return nil
	}
	if q.MaxReceive == 0 {
		return one("redrive", fmt.Sprintf("queue %s has no redrive policy: a poison message is retried until the retention ends", q.URL),
			fmt.Sprintf("give it a dead-letter queue with maxReceiveCount >= %d (RedrivePolicy)", MinMaxReceive))
	}
	need := MinMaxReceive
	if f.Loop != nil && q.Visibility > 0 {
		hold := longestHold(f.Loop.Params)
		need = max(need, int((hold+q.Visibility-1)/q.Visibility)+1)
	}
	if q.MaxReceive >= need {
		return nil
	}
	return one("max-receive-count", fmt.Sprintf("queue %s: maxReceiveCount %d does not cover the throttled receives and the loop's longest hold (%d needed)",
		q.URL, q.MaxReceive, need), fmt.Sprintf("set the RedrivePolicy's maxReceiveCount to at least %d", need))
}

// dlqRetention: the dead-letter queue keeps a message longer than the
// source did (its age counts from the first enqueue). A server that
// reports no retention (ElasticMQ) is not judged.
func dlqRetention(f Facts) []Finding {
	q := f.Queue
	if q == nil || q.DLQ == "" || q.Retention == 0 || q.DLQRetention == 0 || q.DLQRetention > q.Retention {
		return nil
	}
	return one("dlq-retention", fmt.Sprintf("dead-letter queue %s keeps messages %v, not longer than the source's %v: a dead letter can expire at once",
		q.DLQ, q.DLQRetention, q.Retention),
		fmt.Sprintf("aws sqs set-queue-attributes --queue-url %s --attributes MessageRetentionPeriod=1209600 (14 days, above the source's)", q.DLQ))
}

// concurrency: the mapping's MaximumConcurrency fits in the function's
// reserved concurrency, else the excess invocations are throttled and
// their messages return to the queue, counting receives.
func concurrency(f Facts) []Finding {
	if f.Mapping == nil || f.Function == nil || f.Function.Reserved == nil {
		return nil
	}
	r, m := *f.Function.Reserved, f.Mapping.MaxConcurrency
	if m > 0 && m <= r {
		return nil
	}
	have := "no MaximumConcurrency"
	if m > 0 {
		have = fmt.Sprintf("MaximumConcurrency %d", m)
	}
	return one("maximum-concurrency", fmt.Sprintf("mapping %s: %s above function %s's reserved concurrency %d: throttled batches go back to the queue and toward the DLQ",
		f.Mapping.UUID, have, f.Function.Name, r),
		fmt.Sprintf("aws lambda update-event-source-mapping --uuid %s --scaling-config MaximumConcurrency=%d (or raise the reserved concurrency)", f.Mapping.UUID, max(min(r, 1000), 2)))
}

// rateTTL: RATE outlives two schedule periods (and two ticks), so that a
// late invocation does not leave the consumers on their safe rate.
func rateTTL(f Facts) []Finding {
	if f.Loop == nil || f.Schedule <= 0 {
		return nil
	}
	p := f.Loop.Params
	need := 2 * max(f.Schedule, p.TickPeriod)
	if p.RateTTL >= need {
		return nil
	}
	return one("rate-ttl", fmt.Sprintf("loop %s: rate_ttl %v is less than 2 x the schedule's %v (tick_period %v): RATE expires between ticks and the consumers fall back to their safe rate",
		f.Loop.ID, p.RateTTL, f.Schedule, p.TickPeriod), fmt.Sprintf("sluice params set --loop %s rate_ttl=%v", f.Loop.ID, need))
}

// alarms: some CloudWatch alarm watches the loop (dimension Loop).
func alarms(f Facts) []Finding {
	if f.Loop == nil || len(f.Loop.Alarms) > 0 {
		return nil
	}
	return one("alarms", fmt.Sprintf("loop %s: no CloudWatch alarm has the dimension Loop=%s", f.Loop.ID, f.Loop.ID),
		"deploy template.yaml's alarms for the loop, or put-metric-alarm on the controller's LoopError and AtMinRate metrics with dimension Loop")
}

// safeRate: the consumers' safe rate lies in the loop's allowed range.
func safeRate(f Facts) []Finding {
	if f.Loop == nil || f.Function == nil {
		return nil
	}
	s, p := 10.0, f.Loop.Params // consumerenv's default
	if f.Function.SafeRate != nil {
		s = *f.Function.SafeRate
	}
	if s >= p.MinRate && s <= p.MaxRate {
		return nil
	}
	return one("safe-rate", fmt.Sprintf("function %s: SLUICE_SAFE_RATE %g is outside loop %s's range [%g, %g]", f.Function.Name, s, f.Loop.ID, p.MinRate, p.MaxRate),
		fmt.Sprintf("set SLUICE_SAFE_RATE of %s within [%g, %g] (min_rate is the safest)", f.Function.Name, p.MinRate, p.MaxRate))
}

// controllerConcurrency: the controller has reserved concurrency (at least
// 1), so that the account's other functions cannot starve it.
func controllerConcurrency(f Facts) []Finding {
	c := f.Controller
	if c == nil || (c.Reserved != nil && *c.Reserved >= 1) {
		return nil
	}
	problem := fmt.Sprintf("controller %s has no reserved concurrency: a busy account can throttle its ticks", c.Name)
	if c.Reserved != nil {
		problem = fmt.Sprintf("controller %s has reserved concurrency 0: it never runs", c.Name)
	}
	return one("controller-concurrency", problem, fmt.Sprintf("aws lambda put-function-concurrency --function-name %s --reserved-concurrent-executions 1", c.Name))
}
