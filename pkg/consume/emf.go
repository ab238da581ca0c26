package consume

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"
)

// DefaultNamespace is the CloudWatch namespace of the consumers' metrics.
const DefaultNamespace = "Sluice/Consumer"

// BatchMetrics is what one Lambda invocation of a consumer did, for one
// CloudWatch Embedded Metric Format line (WriteEMF): the SQS and the Kafka
// consumer Lambdas emit the same metrics, with the dimension Loop, so that
// the same dashboards and alarms watch both.
type BatchMetrics struct {
	Loop string
	// Consumed is the batch's size; Report what came of it.
	Consumed int
	Report   Report
	// DeadLettered is how many poison messages reached the dead-letter
	// destination.
	DeadLettered int
	// DeadLetterRefused is how many sends of a poison message the
	// dead-letter destination refused (KMS denied, not authorized, too
	// large): each comes back for another try. Alarm on any.
	DeadLetterRefused int
	// Requeued is how many messages the SQS Lambda sent again to their own
	// queue instead of handing them back (their next receive their last,
	// the destination failing: sqsqueue.Handler.MaxRequeues), and
	// KeptLastReceive how many messages it kept invisible for their last
	// receive (sqsqueue.LastVisibility): such messages it could not
	// requeue, and poison the dead-letter queue refused on its last
	// receives. Both are among Failed. Zero on the Kafka Lambda.
	Requeued, KeptLastReceive int
	// Paced is the time spent waiting for pacing slots.
	Paced time.Duration
	// Stats gives the allowed rate, the circuit and the dead letters by
	// reason.
	Stats *Stats
}

// WriteEMF writes m as one Embedded Metric Format line to w, in namespace
// ns ("" means DefaultNamespace).
func (m BatchMetrics) WriteEMF(w io.Writer, ns string) error {
	if ns == "" {
		ns = DefaultNamespace
	}
	allowed, share, fallback := m.Stats.AllowedRate()
	if math.IsInf(allowed, 1) {
		allowed, share = -1, -1 // unlimited; JSON has no infinity
	}
	rep := m.Report
	names := []string{"Consumed", "Stored", "Failed", "Retried", "Released", "Poison", "DeadLettered", "DeadLetterRefused", "Requeued", "KeptLastReceive", "Paused",
		"CircuitOpen", "PacedSeconds", "WorkingSeconds", "AllowedRate", "ShareRate", "RateFallback"}
	defs := make([]map[string]string, len(names))
	for i, n := range names {
		defs[i] = map[string]string{"Name": n, "Unit": emfUnit(n)}
	}
	line := map[string]any{
		"_aws": map[string]any{
			"Timestamp":         time.Now().UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{"Namespace": ns, "Dimensions": [][]string{{"Loop"}}, "Metrics": defs}},
		},
		"Loop": m.Loop, "Consumed": m.Consumed, "Stored": len(rep.Stored), "Failed": len(rep.Retry) + len(rep.Deferred),
		"Retried": len(rep.Retry), "Released": len(rep.Deferred), "Poison": len(rep.Poison), "DeadLettered": m.DeadLettered,
		"DeadLetterRefused": m.DeadLetterRefused, "Requeued": m.Requeued, "KeptLastReceive": m.KeptLastReceive,
		"Paused": b2i(rep.Paused), "CircuitOpen": b2i(m.Stats.Circuit() != CircuitClosed),
		"PacedSeconds": m.Paced.Seconds(), "WorkingSeconds": rep.Working.Seconds(), "DeadLetteredByReason": m.Stats.DeadLettered(),
		"AllowedRate": allowed, "ShareRate": share, "RateFallback": b2i(fallback),
	}
	b, err := json.Marshal(line)
	if err != nil {
		return fmt.Errorf("encode metrics: %w", err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func emfUnit(name string) string {
	switch name {
	case "PacedSeconds", "WorkingSeconds":
		return "Seconds"
	case "AllowedRate", "ShareRate":
		return "Count/Second"
	}
	return "Count"
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
