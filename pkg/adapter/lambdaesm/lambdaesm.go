// Package lambdaesm sets the concurrency of an AWS Lambda event source
// mapping: the coarse actuator of a loop whose consumers are an SQS Lambda
// (loop.MappingScaler). It reads and writes the mapping's
// ScalingConfig.MaximumConcurrency with GetEventSourceMapping and
// UpdateEventSourceMapping, and turns the mapping off and on (Enabled) for
// a loop's pause, and nothing else of the mapping; the controller's role
// needs lambda:GetEventSourceMapping and lambda:UpdateEventSourceMapping on
// the ARNs of the mappings the loops name.
package lambdaesm

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// API is the part of the Lambda client the scaler uses.
type API interface {
	GetEventSourceMapping(ctx context.Context, in *lambda.GetEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error)
	UpdateEventSourceMapping(ctx context.Context, in *lambda.UpdateEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

var _ API = (*lambda.Client)(nil)

// ErrNotFound is wrapped by the errors of a mapping that does not exist
// (ResourceNotFoundException): esm_uuid names no mapping of this account
// and region. Retrying does not help; editing PARAMS does.
var ErrNotFound = errors.New("event source mapping not found")

// Scaler reads and sets the MaximumConcurrency of event source mappings.
type Scaler struct {
	api API
}

var (
	_ loop.MappingScaler = (*Scaler)(nil)
	_ loop.MappingSwitch = (*Scaler)(nil)
)

// New returns a Scaler that calls api (a *lambda.Client).
func New(api API) *Scaler { return &Scaler{api: api} }

// MaximumConcurrency returns the mapping's ScalingConfig.MaximumConcurrency,
// 0 when it has none (no limit but the function's).
func (s *Scaler) MaximumConcurrency(ctx context.Context, uuid string) (int, error) {
	out, err := s.api.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(uuid)})
	if err != nil {
		return 0, wrap("get", uuid, err)
	}
	if out.ScalingConfig == nil || out.ScalingConfig.MaximumConcurrency == nil {
		return 0, nil
	}
	return int(*out.ScalingConfig.MaximumConcurrency), nil
}

// SetMaximumConcurrency sets the mapping's ScalingConfig.MaximumConcurrency
// to n, which must be within [loop.MinMappingConcurrency,
// loop.MaxMappingConcurrency] (an error otherwise, without a call). The
// mapping applies it within a few seconds; a mapping still applying the
// previous update refuses the call (ResourceInUseException), and the
// controller tries again at its next update interval.
func (s *Scaler) SetMaximumConcurrency(ctx context.Context, uuid string, n int) error {
	if n < loop.MinMappingConcurrency || n > loop.MaxMappingConcurrency {
		return fmt.Errorf("lambda event source mapping %s: MaximumConcurrency %d is outside %d..%d", uuid, n, loop.MinMappingConcurrency, loop.MaxMappingConcurrency)
	}
	_, err := s.api.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{
		UUID:          aws.String(uuid),
		ScalingConfig: &types.ScalingConfig{MaximumConcurrency: aws.Int32(int32(n))},
	})
	if err != nil {
		return wrap("update", uuid, err)
	}
	return nil
}

// SetMappingEnabled turns the mapping on or off (its Enabled), and nothing
// else of it: a loop's pause (loop.MappingSwitch). A disabled mapping
// receives nothing (its state goes Disabling, then Disabled, within
// seconds; a batch in flight finishes); an enabled one resumes where its
// event source stands (an SQS queue's messages, a Kafka group's committed
// offsets).
func (s *Scaler) SetMappingEnabled(ctx context.Context, uuid string, enabled bool) error {
	_, err := s.api.UpdateEventSourceMapping(ctx, &lambda.UpdateEventSourceMappingInput{UUID: aws.String(uuid), Enabled: aws.Bool(enabled)})
	if err != nil {
		return wrap("update", uuid, err)
	}
	return nil
}

// wrap gives err its context, and ErrNotFound for a missing mapping.
func wrap(op, uuid string, err error) error {
	var nf *types.ResourceNotFoundException
	if errors.As(err, &nf) {
		return fmt.Errorf("lambda %s event source mapping %s: %w: %w", op, uuid, ErrNotFound, err)
	}
	return fmt.Errorf("lambda %s event source mapping %s: %w", op, uuid, err)
}
