package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// Target names what to check; each part is optional. A mapping brings its
// function and queue when they are not named.
type Target struct {
	Loop, Queue, Function, Mapping, Controller string
	// Schedule is the controller's ScheduleExpression, rate(...).
	Schedule string
}

// Clients are the AWS clients Gather reads with.
type Clients struct {
	SQS        *sqs.Client
	Lambda     *lambda.Client
	CloudWatch *cloudwatch.Client
	Params     interface {
		ReadParams(ctx context.Context, loopID string) (map[string]any, error)
	}
}

// Gather reads the facts of t.
func Gather(ctx context.Context, c Clients, t Target) (Facts, error) {
	var f Facts
	var err error
	if t.Schedule != "" {
		if f.Schedule, err = ParseSchedule(t.Schedule); err != nil {
			return f, err
		}
	}
	if t.Mapping != "" {
		m, err := c.Lambda.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(t.Mapping)})
		if err != nil {
			return f, fmt.Errorf("mapping %s: %w", t.Mapping, err)
		}
		f.Mapping = &Mapping{UUID: t.Mapping}
		if m.ScalingConfig != nil {
			f.Mapping.MaxConcurrency = int(aws.ToInt32(m.ScalingConfig.MaximumConcurrency))
		}
		if t.Function == "" {
			t.Function = aws.ToString(m.FunctionArn)
		}
		if t.Queue == "" {
			if t.Queue, err = queueURL(ctx, c.SQS, aws.ToString(m.EventSourceArn)); err != nil {
				return f, err
			}
		}
	}
	if t.Queue != "" {
		if f.Queue, err = readQueue(ctx, c.SQS, t.Queue); err != nil {
			return f, err
		}
	}
	for _, fn := range []struct {
		name string
		dst  **Function
	}{{t.Function, &f.Function}, {t.Controller, &f.Controller}} {
		if fn.name != "" {
			if *fn.dst, err = readFunction(ctx, c.Lambda, fn.name); err != nil {
				return f, err
			}
		}
	}
	if t.Loop != "" {
		if f.Loop, err = readLoop(ctx, c, t.Loop); err != nil {
			return f, err
		}
	}
	return f, nil
}

// ParseSchedule is the period of an EventBridge rate expression,
// "rate(5 minutes)".
func ParseSchedule(expr string) (time.Duration, error) {
	s, ok := strings.CutPrefix(strings.TrimSpace(expr), "rate(")
	s, ok2 := strings.CutSuffix(s, ")")
	fields := strings.Fields(s)
	if !ok || !ok2 || len(fields) != 2 {
		return 0, fmt.Errorf("schedule %q: want rate(N minutes|hours|days)", expr)
	}
	n, err := strconv.Atoi(fields[0])
	unit := map[string]time.Duration{"minute": time.Minute, "minutes": time.Minute, "hour": time.Hour, "hours": time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour}[fields[1]]
	if err != nil || n <= 0 || unit == 0 {
		return 0, fmt.Errorf("schedule %q: want rate(N minutes|hours|days) with N > 0", expr)
	}
	return time.Duration(n) * unit, nil
}

func queueURL(ctx context.Context, c *sqs.Client, arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 {
		return "", fmt.Errorf("queue ARN %q: not an SQS ARN", arn)
	}
	out, err := c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(parts[5]), QueueOwnerAWSAccountId: aws.String(parts[4])})
	if err != nil {
		return "", fmt.Errorf("queue %s: %w", arn, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

func seconds(attrs map[string]string, name sqstypes.QueueAttributeName) time.Duration {
	n, _ := strconv.Atoi(attrs[string(name)])
	return time.Duration(n) * time.Second
}

func readQueue(ctx context.Context, c *sqs.Client, url string) (*Queue, error) {
	attrs, err := queueAttrs(ctx, c, url)
	if err != nil {
		return nil, err
	}
	q := &Queue{URL: url, Visibility: seconds(attrs, sqstypes.QueueAttributeNameVisibilityTimeout),
		Retention: seconds(attrs, sqstypes.QueueAttributeNameMessageRetentionPeriod)}
	if rp := attrs[string(sqstypes.QueueAttributeNameRedrivePolicy)]; rp != "" {
		var p struct {
			Target string `json:"deadLetterTargetArn"`
			Max    any    `json:"maxReceiveCount"`
		}
		if err := json.Unmarshal([]byte(rp), &p); err != nil {
			return nil, fmt.Errorf("queue %s: RedrivePolicy %q: %w", url, rp, err)
		}
		q.MaxReceive, _ = strconv.Atoi(fmt.Sprint(p.Max))
		if q.DLQ, err = queueURL(ctx, c, p.Target); err != nil {
			return nil, err
		}
		dlq, err := queueAttrs(ctx, c, q.DLQ)
		if err != nil {
			return nil, err
		}
		q.DLQRetention = seconds(dlq, sqstypes.QueueAttributeNameMessageRetentionPeriod)
	}
	return q, nil
}

func queueAttrs(ctx context.Context, c *sqs.Client, url string) (map[string]string, error) {
	out, err := c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameVisibilityTimeout,
			sqstypes.QueueAttributeNameMessageRetentionPeriod, sqstypes.QueueAttributeNameRedrivePolicy}})
	if err != nil {
		return nil, fmt.Errorf("queue %s: %w", url, err)
	}
	return out.Attributes, nil
}

func readFunction(ctx context.Context, c *lambda.Client, name string) (*Function, error) {
	cfg, err := c.GetFunctionConfiguration(ctx, &lambda.GetFunctionConfigurationInput{FunctionName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("function %s: %w", name, err)
	}
	f := &Function{Name: aws.ToString(cfg.FunctionName), Timeout: time.Duration(aws.ToInt32(cfg.Timeout)) * time.Second}
	if cfg.Environment != nil {
		if v, ok := cfg.Environment.Variables["SLUICE_SAFE_RATE"]; ok {
			if r, err := strconv.ParseFloat(v, 64); err == nil {
				f.SafeRate = &r
			}
		}
	}
	conc, err := c.GetFunctionConcurrency(ctx, &lambda.GetFunctionConcurrencyInput{FunctionName: aws.String(name)})
	if err != nil {
		return nil, fmt.Errorf("function %s: concurrency: %w", name, err)
	}
	if conc.ReservedConcurrentExecutions != nil {
		r := int(*conc.ReservedConcurrentExecutions)
		f.Reserved = &r
	}
	return f, nil
}

func readLoop(ctx context.Context, c Clients, id string) (*Loop, error) {
	attrs, err := c.Params.ReadParams(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("loop %s: %w", id, err)
	}
	p, err := loop.DecodeParams(id, attrs, metricsources.All())
	if err != nil {
		return nil, fmt.Errorf("loop %s: %w", id, err)
	}
	l := &Loop{ID: id, Params: p}
	pages := cloudwatch.NewDescribeAlarmsPaginator(c.CloudWatch, &cloudwatch.DescribeAlarmsInput{})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("loop %s: alarms: %w", id, err)
		}
		for _, a := range out.MetricAlarms {
			for _, d := range a.Dimensions {
				if aws.ToString(d.Name) == "Loop" && aws.ToString(d.Value) == id {
					l.Alarms = append(l.Alarms, aws.ToString(a.AlarmName))
				}
			}
		}
	}
	return l, nil
}
