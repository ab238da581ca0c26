package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// kafkaHeldBound is the worker's kafkasource.Config.MaxHeld in the
// dlq-refuses scenario: small, so that the bound is met by a few hundred
// records.
const kafkaHeldBound = 20

// refuseDLT makes the broker refuse every write to the run's dead-letter
// topic: its max.message.bytes set to 1, so that each produce is
// answered MESSAGE_TOO_LARGE, also the dead letter sent again with its
// value cut (kafkasource.CutDeadRecord keeps 1,024 bytes): the poison is
// held as with a lost ACL (TOPIC_AUTHORIZATION_FAILED, which the client
// fails alike, at once). on false deletes the setting: the broker's
// default takes writes again.
func (k *kafkaRun) refuseDLT(ctx context.Context, on bool) error {
	one := "1"
	cfg := kadm.AlterConfig{Op: kadm.SetConfig, Name: "max.message.bytes", Value: &one}
	if !on {
		cfg = kadm.AlterConfig{Op: kadm.DeleteConfig, Name: "max.message.bytes"}
	}
	res, err := kadm.NewClient(k.cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{cfg}, k.topic+".dlt")
	if err == nil {
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		return fmt.Errorf("max.message.bytes of %s.dlt (refusing %v): %w", k.topic, on, err)
	}
	return nil
}

// dlqCounts is what the consumers say of a refusing dead-letter topic:
// the records they hold back from the commit (-1: not told) and the
// refusals they counted for an alarm.
type dlqCounts struct {
	held    func() int
	refused func() int64
}

// dltRefused keeps the dead-letter topic refusing for d (it refuses
// from the start: refuseDLT before the records are produced), sampling
// the consumer's held records every 100 ms, then lets it take writes.
// More held than the bound (partitions × (MaxHeld + one batch)), or no
// refusal counted, fails the scenario.
func (k *kafkaRun) dltRefused(ctx context.Context, sc KafkaScenario, c dlqCounts) (map[string]any, error) {
	heldMax := -1
	for end := time.Now().Add(sc.RefuseDLT); time.Now().Before(end); {
		if c.held != nil {
			heldMax = max(heldMax, c.held())
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if err := k.refuseDLT(ctx, false); err != nil {
		return nil, err
	}
	// The Lambda writes its count when the invocation ends, which may be
	// after the refusal: wait for it as long as an invocation lasts.
	wctx, cancel := context.WithTimeout(ctx, kafkaFunctionTimeout+5*time.Second)
	_ = until(wctx, func() bool { return c.refused() > 0 })
	cancel()
	refused := c.refused()
	k.faults = append(k.faults, fmt.Sprintf("dead-letter topic refused every write (MESSAGE_TOO_LARGE) for %v", sc.RefuseDLT))
	extra := map[string]any{"held_max": heldMax, "dlq_refused_counted": refused}
	bound := int(sc.Partitions) * (kafkaHeldBound + kafkaBatch)
	switch {
	case heldMax > bound:
		return extra, fmt.Errorf("the consumer held %d records back from the commit while the dead-letter topic refused; want at most %d", heldMax, bound)
	case refused == 0:
		return extra, fmt.Errorf("the dead-letter topic refused every write for %v and no refusal was counted; want them counted for an alarm", sc.RefuseDLT)
	}
	return extra, nil
}
