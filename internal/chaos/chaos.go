// Package chaos runs the consumers under real faults and checks what an
// operator of a production queue cares about: no healthy message
// dead-lettered, none lost, none stored twice, every poison message
// dead-lettered once with its reason, and no Lambda invocation run to its
// deadline. The paths are the real ones: the SQS consumer's bootstrap under
// the Lambda Runtime Interface Emulator fed by an emulated event source
// mapping, and the worker binary, on a real SQS endpoint (moto or ElasticMQ),
// writing to an HTTP destination whose answers the scenario controls.
// `make chaos` runs every scenario at full size; the tests run them short.
package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
)

// Result is one scenario on one path, as `make chaos` prints it.
type Result struct {
	Name                string `json:"name"`
	Path                string `json:"path"`
	Sent                int    `json:"sent"`
	Stored              int    `json:"stored"`
	Poison              int    `json:"poison"`
	DeadLettered        int    `json:"dead_lettered"`
	HealthyDeadLettered int    `json:"healthy_dead_lettered"`
	Missing             int    `json:"missing"`
	Duplicates          int    `json:"duplicates"`
	MaxAttempts         int    `json:"max_attempts"`
	LambdaDeadlineHits  int    `json:"lambda_deadline_hits"`
	OK                  bool   `json:"ok"`
	// What the scenario adds.
	PoisonWithReason int            `json:"poison_with_reason"`
	Invocations      int64          `json:"invocations,omitempty"`
	Answers          map[int]int    `json:"answers,omitempty"`
	Faults           []string       `json:"faults,omitempty"`
	Seconds          float64        `json:"seconds"`
	Extra            map[string]any `json:"extra,omitempty"`
	Error            string         `json:"error,omitempty"`
}

// check sets OK: nothing healthy dead-lettered, nothing missing or
// duplicated, every poison message dead-lettered once with its reason, no
// deadline hit.
func (r *Result) check() {
	r.OK = r.Error == "" && r.HealthyDeadLettered == 0 && r.Missing == 0 && r.Duplicates == 0 &&
		r.DeadLettered == r.Poison && r.PoisonWithReason == r.Poison && r.LambdaDeadlineHits == 0 &&
		r.Stored+r.Poison == r.Sent
}

// Body is message seq's payload: healthy JSON, or one of two poisons
// (malformed, refused by the HTTP destination for its content).
func Body(seq int, poison bool) string {
	switch {
	case !poison:
		return fmt.Sprintf(`{"seq":%d,"qty":%d}`, seq, seq%7+1)
	case seq%2 == 0:
		return fmt.Sprintf("poison seq=%d {not json", seq)
	}
	return fmt.Sprintf(`{"seq":%d,"reject":true}`, seq)
}

// bodyFor is Body for a sink: MySQL takes any JSON object, so its poison
// messages are all malformed.
func bodyFor(sink string, seq int, poison bool) string {
	if sink == "mysql" && poison {
		return fmt.Sprintf("poison seq=%d {not json", seq)
	}
	return Body(seq, poison)
}

// childFirst is Body for the fk-order scenario: message 2k is the child of
// message 2k+1, which is sent after it (children before parents); a child
// whose parent is poison has none. Poison messages are malformed.
func childFirst(seq int, poison bool) string {
	switch {
	case poison:
		return fmt.Sprintf("poison seq=%d {not json", seq)
	case seq%2 == 0 && !IsPoison(seq+1):
		return fmt.Sprintf(`{"seq":%d,"parent":%d}`, seq, seq+1)
	}
	return fmt.Sprintf(`{"seq":%d,"parent":null}`, seq)
}

// IsPoison says whether message seq is poison: 2 in 100.
func IsPoison(seq int) bool { return seq%100 == 17 || seq%100 == 42 }

// Produce sends n messages with a "tenant" attribute (to check that dead
// letters keep it); it returns how many are poison. body, when not nil,
// makes the bodies instead of bodyFor.
func Produce(ctx context.Context, c *sqs.Client, url, sink string, n int, body func(seq int, poison bool) string) (int, error) {
	if body == nil {
		body = func(seq int, poison bool) string { return bodyFor(sink, seq, poison) }
	}
	poison := 0
	err := consumers.SendAll(ctx, c, url, n, func(i int) types.SendMessageBatchRequestEntry {
		if IsPoison(i) {
			poison++
		}
		return types.SendMessageBatchRequestEntry{
			MessageBody:       aws.String(body(i, IsPoison(i))),
			MessageAttributes: map[string]types.MessageAttributeValue{"tenant": {DataType: aws.String("String"), StringValue: aws.String("acme")}},
		}
	})
	return poison, err
}

// reasoned says whether a dead letter carries its reason and kept the
// original "tenant" attribute.
func reasoned(m types.Message) bool {
	return consumers.HasReason(m) && aws.ToString(m.MessageAttributes["tenant"].StringValue) == "acme"
}

// tally counts a finished run: the destination's rows (the HTTP
// destination's, or MariaDB's when db is set) and the DLQ.
func tally(ctx context.Context, st *consumers.Stack, dest *Destination, db *MariaDB, r *Result) error {
	dead, withReason, err := consumers.DeadLetters(ctx, st.SQS, st.DLQURL, reasoned)
	if err != nil {
		return err
	}
	stored := dest.Stored()
	if db != nil {
		if stored, err = db.Stored(ctx); err != nil {
			return err
		}
	}
	for seq := range r.Sent {
		n := stored[seq]
		switch {
		case IsPoison(seq):
		case n == 0:
			r.Missing++
		default:
			r.Stored++
		}
		if n > 1 {
			r.Duplicates += n - 1
		}
		if dead[seq] > 0 {
			r.DeadLettered++
			if !IsPoison(seq) {
				r.HealthyDeadLettered++
			}
		}
	}
	r.PoisonWithReason = withReason
	if db == nil {
		r.MaxAttempts = dest.MaxAttempts()
		r.Answers = dest.Answers()
	}
	return nil
}

// drained waits until the queue holds nothing, visible or not.
func drained(ctx context.Context, c *sqs.Client, url string) error {
	for {
		n, err := consumers.InFlight(ctx, c, url)
		if err == nil && n == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("queue %s not drained (%d left): %w", url, n, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// JSON is the line `make chaos` prints last.
func JSON(results []Result) string {
	b, _ := json.Marshal(map[string]any{"scenarios": results})
	return string(b)
}
