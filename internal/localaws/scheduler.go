package localaws

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"

	"github.com/aws/aws-lambda-go/events"
)

// Default identity of the local account and schedule rule.
const (
	DefaultAccount = "000000000000"
	DefaultRegion  = "us-east-1"
	DefaultRule    = "sluice-controller-schedule"
)

// ScheduledEvent returns the payload EventBridge sends to a schedule rule's
// target at time t: detail-type "Scheduled Event", source aws.events, the
// rule's ARN in resources, an empty detail object.
func ScheduledEvent(id, account, region, rule string, t time.Time) events.EventBridgeEvent {
	return events.EventBridgeEvent{
		Version:    "0",
		ID:         id,
		DetailType: "Scheduled Event",
		Source:     "aws.events",
		AccountID:  account,
		Time:       t.UTC().Truncate(time.Second),
		Region:     region,
		Resources:  []string{fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", region, account, rule)},
		Detail:     json.RawMessage(`{}`),
	}
}

// NewEventID returns a random id in the UUID format of EventBridge's ids.
func NewEventID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Invocation is the outcome of one scheduled invocation.
type Invocation struct {
	At       time.Time
	EventID  string
	Response []byte
	Err      error
	Took     time.Duration
}

// Scheduler invokes a function every Period, at multiples of Period since
// the Unix epoch (an EventBridge rate schedule fires on a fixed grid too),
// with a scheduled-event payload. Invocations do not overlap: one that takes
// longer than a period delays the next, as a reserved concurrency of 1 would.
type Scheduler struct {
	Invoker Invoker
	Period  time.Duration
	// Account, Region and Rule name the rule in the event (defaults:
	// DefaultAccount, DefaultRegion, DefaultRule).
	Account, Region, Rule string
	Clock                 consume.Clock
	// NewID returns each event's id (default NewEventID).
	NewID func() string
	Log   *slog.Logger
	// OnInvocation, when set, sees every invocation's outcome.
	OnInvocation func(Invocation)
}

// Run invokes the function every period until ctx ends. A failed invocation
// is logged and reported; the schedule carries on (EventBridge retries are
// not modelled: the next tick is the retry).
func (s *Scheduler) Run(ctx context.Context) error {
	if s.Invoker == nil || s.Clock == nil {
		return fmt.Errorf("scheduler: Invoker and Clock must be set")
	}
	if s.Period < time.Second {
		return fmt.Errorf("scheduler: period %v: want at least 1s", s.Period)
	}
	for {
		now := s.Clock.Now()
		if err := s.Clock.Sleep(ctx, now.Truncate(s.Period).Add(s.Period).Sub(now)); err != nil {
			return nil
		}
		s.Fire(ctx)
	}
}

// Fire invokes the function once, now.
func (s *Scheduler) Fire(ctx context.Context) Invocation {
	account, region, rule := s.Account, s.Region, s.Rule
	if account == "" {
		account = DefaultAccount
	}
	if region == "" {
		region = DefaultRegion
	}
	if rule == "" {
		rule = DefaultRule
	}
	newID := s.NewID
	if newID == nil {
		newID = NewEventID
	}
	inv := Invocation{At: s.Clock.Now(), EventID: newID()}
	payload, err := json.Marshal(ScheduledEvent(inv.EventID, account, region, rule, inv.At))
	if err != nil {
		inv.Err = fmt.Errorf("encode scheduled event: %w", err)
	} else {
		inv.Response, inv.Err = s.Invoker.Invoke(ctx, payload)
	}
	inv.Took = s.Clock.Now().Sub(inv.At)
	log := s.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if inv.Err != nil {
		log.WarnContext(ctx, "scheduled invocation failed", "event_id", inv.EventID, "err", inv.Err)
	} else {
		log.InfoContext(ctx, "scheduled invocation", "event_id", inv.EventID, "took", inv.Took, "response", string(inv.Response))
	}
	if s.OnInvocation != nil {
		s.OnInvocation(inv)
	}
	return inv
}
