package lambdaesm_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sluice-dev/sluice/pkg/adapter/lambdaesm"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// invokingAPI is a Lambda API with one mapping on function fn whose
// invocations answer answer (or fail with err, or a function error).
type invokingAPI struct {
	recordingAPI
	answer   string
	funcErr  string
	err      error
	invoked  string
	payloads []protocol.ProbeEvent
}

func (a *invokingAPI) GetEventSourceMapping(_ context.Context, in *lambda.GetEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error) {
	return &lambda.GetEventSourceMappingOutput{UUID: in.UUID, FunctionArn: aws.String("arn:aws:lambda:us-east-1:1:function:fn")}, nil
}

func (a *invokingAPI) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	a.invoked = aws.ToString(in.FunctionName)
	var ev protocol.ProbeEvent
	_ = json.Unmarshal(in.Payload, &ev)
	a.payloads = append(a.payloads, ev)
	if a.err != nil {
		return nil, a.err
	}
	out := &lambda.InvokeOutput{Payload: []byte(a.answer)}
	if a.funcErr != "" {
		out.FunctionError = aws.String(a.funcErr)
	}
	return out, nil
}

// TestProbeDestination: the probe invokes the mapping's function with a
// probe event and reads its answer; a failed invocation, a function error
// or an answer that is not a probe's is an error (the probe was not made).
func TestProbeDestination(t *testing.T) {
	for _, c := range []struct {
		name, answer, funcErr string
		err                   error
		up                    bool
		fails                 bool
	}{
		{name: "up", answer: `{"sluice_probe":{"up":true}}`, up: true},
		{name: "down", answer: `{"sluice_probe":{"up":false,"error":"dial tcp: connection refused"}}`},
		{name: "invoke fails", err: errors.New("AccessDeniedException"), fails: true},
		{name: "function error", answer: `{"errorMessage":"neither an SQS event"}`, funcErr: "Unhandled", fails: true},
		{name: "not a probe's answer", answer: `{"batchItemFailures":[]}`, fails: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := &invokingAPI{answer: c.answer, funcErr: c.funcErr, err: c.err}
			up, err := lambdaesm.New(api).ProbeDestination(context.Background(), "esm-1")
			if up != c.up || (err != nil) != c.fails {
				t.Errorf("ProbeDestination = %v, %v; want up %v, an error %v", up, err, c.up, c.fails)
			}
			if !strings.HasSuffix(api.invoked, ":function:fn") || len(api.payloads) != 1 || api.payloads[0].Probe.Mapping != "esm-1" {
				t.Errorf("invoked %q with %+v; want the mapping's function with a probe of esm-1", api.invoked, api.payloads)
			}
		})
	}
	if _, err := lambdaesm.New(&recordingAPI{}).ProbeDestination(context.Background(), "esm-1"); err == nil {
		t.Error("ProbeDestination with a client that cannot invoke = nil; want an error")
	}
}
