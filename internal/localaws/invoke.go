// Package localaws holds thin local stand-ins for the AWS plumbing that
// invokes Sluice's Lambda functions, for running the real bootstrap binaries
// under the AWS Lambda Runtime Interface Emulator (RIE):
//
//   - Scheduler invokes a function every period with a real EventBridge
//     scheduled-event payload, as an EventBridge schedule rule does;
//   - Poller receives from an SQS queue and invokes a function with real SQS
//     batch events, and honours the partial batch response
//     (ReportBatchItemFailures): it deletes what the function did not report
//     as failed and leaves the failures to the visibility timeout and the
//     queue's redrive policy, as the SQS event source mapping does;
//   - Fleet runs at most the mapping's MaximumConcurrency of those pollers
//     (read from the local endpoint's Lambda API, CreateMapping) and sums
//     the billed duration of their invocations;
//   - KafkaPoller reads Kafka topics with a consumer group and invokes a
//     function with real Kafka events, committing a batch only after its
//     invocation succeeded and retrying it after a failure, as Lambda's
//     MSK and self-managed Kafka event source mappings do.
package localaws

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Invoker invokes a function with a payload and returns its response.
type Invoker interface {
	Invoke(ctx context.Context, payload []byte) ([]byte, error)
}

// InvokePath is the RIE's invocation path for its one function.
const InvokePath = "/2015-03-31/functions/function/invocations"

// RIE invokes the function served by a Runtime Interface Emulator.
type RIE struct {
	// URL is the emulator's base URL (http://127.0.0.1:9000) or its full
	// invocation URL.
	URL    string
	Client *http.Client
}

var _ Invoker = (*RIE)(nil)

// FunctionError is a function's error response (the handler returned an
// error, or the runtime failed): {"errorMessage","errorType"}.
type FunctionError struct {
	Message string `json:"errorMessage"`
	Type    string `json:"errorType"`
}

func (e *FunctionError) Error() string {
	return fmt.Sprintf("function error %s: %s", e.Type, e.Message)
}

// Invoke posts payload to the emulator and returns the function's response.
// A function error is returned as a *FunctionError.
func (r *RIE) Invoke(ctx context.Context, payload []byte) ([]byte, error) {
	url := r.URL
	if !bytes.HasSuffix([]byte(url), []byte(InvokePath)) {
		url += InvokePath
	}
	client := r.Client
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Minute}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", url, err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: read response: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return body, fmt.Errorf("invoke %s: HTTP %d: %s", url, resp.StatusCode, bytes.TrimSpace(body))
	}
	if fe := functionError(body); fe != nil {
		return body, fe
	}
	if resp.Header.Get("X-Amz-Function-Error") != "" {
		return body, &FunctionError{Message: string(body), Type: resp.Header.Get("X-Amz-Function-Error")}
	}
	return body, nil
}

// functionError decodes an error document, or returns nil when body is
// not one.
func functionError(body []byte) *FunctionError {
	t := bytes.TrimSpace(body)
	if len(t) == 0 || t[0] != '{' || !bytes.Contains(t, []byte(`"errorMessage"`)) {
		return nil
	}
	var fe FunctionError
	if err := json.Unmarshal(t, &fe); err != nil || fe.Message == "" {
		return nil
	}
	return &fe
}
