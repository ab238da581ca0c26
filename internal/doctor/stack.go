package doctor

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
)

// StackDescriber is the part of the CloudFormation client FromStack needs.
type StackDescriber interface {
	DescribeStacks(ctx context.Context, in *cloudformation.DescribeStacksInput, opts ...func(*cloudformation.Options)) (*cloudformation.DescribeStacksOutput, error)
}

// FromStack is the target of a stack deployed from template.yaml: its
// outputs name the table, the controller, the queue and the mapping; its
// parameters the loop (LoopId) and the schedule (ScheduleExpression).
// Whatever t already names is kept.
func FromStack(ctx context.Context, cf StackDescriber, name string, t Target) (Target, string, error) {
	out, err := cf.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return t, "", fmt.Errorf("stack %s: %w", name, err)
	}
	if len(out.Stacks) == 0 {
		return t, "", fmt.Errorf("stack %s: not found", name)
	}
	s := out.Stacks[0]
	vals := map[string]string{}
	for _, o := range s.Outputs {
		vals[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	for _, p := range s.Parameters {
		vals[aws.ToString(p.ParameterKey)] = aws.ToString(p.ParameterValue)
	}
	set := func(dst *string, key string) {
		if *dst == "" {
			*dst = vals[key]
		}
	}
	set(&t.Controller, "ControllerFunctionName")
	set(&t.Queue, "ConsumerQueueUrl")
	set(&t.Mapping, "ConsumerMappingUUID")
	set(&t.Loop, "LoopId")
	set(&t.Schedule, "ScheduleExpression")
	return t, vals["TableName"], nil
}
