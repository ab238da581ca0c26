package lambdaesm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/lambdaesm"
)

// TestScalerOnMoto runs the scaler against moto_server's Lambda: a
// function, an SQS event source mapping with MaximumConcurrency 5, then
// read, set to 40, read back; a mapping that does not exist is ErrNotFound.
func TestScalerOnMoto(t *testing.T) {
	endpoint := testenv.AWSEndpoint(t)
	ctx := context.Background()
	client := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	uuid := mapping(t, ctx, client, endpoint, 5)
	s := lambdaesm.New(client)

	if n, err := s.MaximumConcurrency(ctx, uuid); err != nil || n != 5 {
		t.Fatalf("MaximumConcurrency(%s) = %d, %v; want 5", uuid, n, err)
	}
	if err := s.SetMaximumConcurrency(ctx, uuid, 40); err != nil {
		t.Fatalf("SetMaximumConcurrency(%s, 40) = %v", uuid, err)
	}
	if n, err := s.MaximumConcurrency(ctx, uuid); err != nil || n != 40 {
		t.Errorf("after the update: MaximumConcurrency = %d, %v; want 40", n, err)
	}
	if _, err := s.MaximumConcurrency(ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, lambdaesm.ErrNotFound) {
		t.Errorf("MaximumConcurrency(unknown) = %v; want ErrNotFound", err)
	}
}

// TestSetRefusesOutOfBounds: values AWS would refuse never reach the API.
func TestSetRefusesOutOfBounds(t *testing.T) {
	api := &recordingAPI{}
	s := lambdaesm.New(api)
	for _, n := range []int{0, 1, 1001, 5000} {
		if err := s.SetMaximumConcurrency(context.Background(), "u", n); err == nil {
			t.Errorf("SetMaximumConcurrency(%d) = nil; want an error", n)
		}
	}
	if api.updates != 0 {
		t.Errorf("%d UpdateEventSourceMapping calls; want none", api.updates)
	}
	if err := s.SetMaximumConcurrency(context.Background(), "u", 2); err != nil || api.updates != 1 || api.last != 2 {
		t.Errorf("SetMaximumConcurrency(2) = %v with %d calls (last %d); want one call with 2", err, api.updates, api.last)
	}
}

// recordingAPI is a Lambda API that records the updates and has no
// mappings.
type recordingAPI struct {
	updates int
	last    int32
}

func (r *recordingAPI) GetEventSourceMapping(context.Context, *lambda.GetEventSourceMappingInput, ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error) {
	return nil, &types.ResourceNotFoundException{Message: aws.String("no mapping")}
}

func (r *recordingAPI) UpdateEventSourceMapping(_ context.Context, in *lambda.UpdateEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	r.updates++
	r.last = *in.ScalingConfig.MaximumConcurrency
	return &lambda.UpdateEventSourceMappingOutput{}, nil
}

// mapping creates, on moto_server, an event source mapping with
// MaximumConcurrency n (localaws.CreateMapping: a queue, a role, a function),
// deleted at the end of the test, and returns its UUID.
func mapping(t *testing.T, ctx context.Context, client *lambda.Client, endpoint string, n int) string {
	t.Helper()
	uuid, cleanup, err := localaws.CreateMapping(ctx, endpoint, client, fmt.Sprintf("sluice-esm-test-%d", time.Now().UnixNano()), n)
	t.Cleanup(cleanup)
	if err != nil {
		t.Fatalf("create the event source mapping: %v", err)
	}
	return uuid
}

// TestSwitchOnMoto turns a mapping on moto_server off and on: its State
// reads Disabled, then Enabled, and its MaximumConcurrency is untouched.
func TestSwitchOnMoto(t *testing.T) {
	endpoint := testenv.AWSEndpoint(t)
	ctx := context.Background()
	client := lambda.New(lambda.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint),
		Credentials: credentials.NewStaticCredentialsProvider("test", "test", "")})
	uuid := mapping(t, ctx, client, endpoint, 7)
	s := lambdaesm.New(client)
	enabled := localaws.MappingEnabled(client, uuid)
	for _, on := range []bool{false, true} {
		if err := s.SetMappingEnabled(ctx, uuid, on); err != nil {
			t.Fatalf("SetMappingEnabled(%s, %v) = %v", uuid, on, err)
		}
		if got, err := enabled(ctx); err != nil || got != on {
			t.Errorf("after SetMappingEnabled(%v): enabled = %v, %v", on, got, err)
		}
	}
	if n, err := s.MaximumConcurrency(ctx, uuid); err != nil || n != 7 {
		t.Errorf("MaximumConcurrency = %d, %v; want 7, untouched", n, err)
	}
}
