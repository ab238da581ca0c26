package lambdaesm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Invoker is the part of the Lambda client the probes use; *lambda.Client
// has it. A Scaler whose API is not one cannot probe.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, opts ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var (
	_ Invoker            = (*lambda.Client)(nil)
	_ loop.MappingProber = (*Scaler)(nil)
)

// ProbeDestination asks the mapping's function whether its destination is
// up, without receiving a message (loop.MappingProber): it reads the
// mapping's FunctionArn (GetEventSourceMapping) and invokes it
// synchronously with a protocol.ProbeEvent. The controller's role then
// needs lambda:InvokeFunction on that function. An invocation that fails,
// a function error, or an answer that is not a protocol.ProbeAnswer (a
// function that does not know probes) is an error: the probe could not be
// made.
func (s *Scaler) ProbeDestination(ctx context.Context, uuid string) (bool, error) {
	inv, ok := s.api.(Invoker)
	if !ok {
		return false, fmt.Errorf("lambda event source mapping %s: the client cannot invoke functions", uuid)
	}
	out, err := s.api.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(uuid)})
	if err != nil {
		return false, wrap("get", uuid, err)
	}
	fn := aws.ToString(out.FunctionArn)
	if fn == "" {
		return false, fmt.Errorf("lambda event source mapping %s: no FunctionArn", uuid)
	}
	payload, _ := json.Marshal(protocol.ProbeEvent{Probe: protocol.ProbeRequest{Mapping: uuid}})
	res, err := inv.Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String(fn), Payload: payload})
	if err != nil {
		return false, fmt.Errorf("lambda invoke %s to probe its destination: %w", fn, err)
	}
	return probeAnswer(fn, res)
}

// probeAnswer reads a probe's answer from function fn.
func probeAnswer(fn string, res *lambda.InvokeOutput) (bool, error) {
	if f := aws.ToString(res.FunctionError); f != "" {
		return false, fmt.Errorf("lambda invoke %s to probe its destination: function error %s: %.200s", fn, f, res.Payload)
	}
	var raw map[string]json.RawMessage
	var ans protocol.ProbeAnswer
	if err := json.Unmarshal(res.Payload, &raw); err != nil || raw["sluice_probe"] == nil {
		return false, fmt.Errorf("lambda invoke %s to probe its destination: %w: %.200s", fn, errNoProbe, res.Payload)
	}
	if err := json.Unmarshal(res.Payload, &ans); err != nil {
		return false, fmt.Errorf("lambda invoke %s to probe its destination: %w", fn, err)
	}
	return ans.Probe.Up, nil
}

// errNoProbe: the function answered something else than a probe's answer.
var errNoProbe = errors.New("the answer is not a probe's (a function that does not answer probes?)")
