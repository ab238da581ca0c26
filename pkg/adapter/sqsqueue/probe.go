package sqsqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// ErrUnknownEvent is wrapped by Invoke's error for a payload that is
// neither an SQS event nor a probe (protocol.ProbeEvent).
var ErrUnknownEvent = errors.New("neither an SQS event (Records) nor a probe (sluice_probe)")

// Invoke is the function's entry point (lambda.Start(h.Invoke)): an SQS
// event of the mapping (a JSON object with "Records") goes to Handle, as
// it always did; a protocol.ProbeEvent, the controller's direct invocation
// while it holds the mapping off, is answered by Probe without touching a
// message. Anything else is an error wrapping ErrUnknownEvent.
func (h *Handler) Invoke(ctx context.Context, payload json.RawMessage) (any, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(payload, &keys); err != nil {
		return nil, fmt.Errorf("sqs consumer: %w: %w", ErrUnknownEvent, err)
	}
	if protocol.IsProbe(payload) {
		return h.Probe(ctx), nil
	}
	recs, ok := keys["Records"]
	if !ok || !bytes.HasPrefix(bytes.TrimSpace(recs), []byte("[")) {
		return nil, fmt.Errorf("sqs consumer: %w", ErrUnknownEvent)
	}
	var ev events.SQSEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, fmt.Errorf("sqs consumer: SQS event: %w", err)
	}
	return h.Handle(ctx, ev)
}

// Probe checks the destination (consume.Consumer.Probe) and says whether
// it is up; it receives, changes and deletes no message.
func (h *Handler) Probe(ctx context.Context) protocol.ProbeAnswer {
	err := h.Consumer.Probe(ctx)
	if h.Log != nil {
		h.Log.InfoContext(ctx, "probe", "loop", h.Loop, "up", err == nil, "err", err)
	}
	if err != nil {
		return protocol.ProbeAnswer{Probe: protocol.ProbeResult{Error: err.Error()}}
	}
	return protocol.ProbeAnswer{Probe: protocol.ProbeResult{Up: true}}
}
