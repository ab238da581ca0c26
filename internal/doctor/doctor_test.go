package doctor_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cftypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	lambdatypes "github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/doctor"
	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
)

// spec is a deployment: every knob a rule reads. clean() breaks none.
type spec struct {
	visibility, retention, dlqRetention int // seconds
	maxReceive                          int
	timeout, reserved, mapConc          int32
	rateTTL                             string
	alarm                               bool
	safeRate                            string
	controllerReserved                  int32 // -1: none
}

func clean() spec {
	return spec{visibility: 180, retention: 345600, dlqRetention: 1209600, maxReceive: 10, timeout: 30, reserved: 10, mapConc: 5,
		rateTTL: "3m", alarm: true, safeRate: "10", controllerReserved: 1}
}

// env is the local endpoints' clients, all on moto (ElasticMQ keeps no
// MessageRetentionPeriod, which two rules read).
type env struct {
	c     doctor.Clients
	table string
	role  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	endpoint := testenv.AWSEndpoint(t)
	cfg, err := awsconf.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ddb, table := ddbtest.Table(t, "sluice-doctor")
	motoS := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint) })
	e := &env{c: doctor.Clients{SQS: motoS, Lambda: lambda.NewFromConfig(cfg), CloudWatch: cwmetric.NewClient(cfg, endpoint),
		Params: ddbloop.New(ddb, table)}, table: table}
	// moto creates a function only with a role it knows: made with the
	// aws CLI, as an operator would.
	name := fmt.Sprintf("sluice-doctor-%d", time.Now().UnixNano())
	out, err := exec.Command(testenv.Binary(t, "SLUICE_AWS_BIN", "aws"), "iam", "create-role", "--endpoint-url", endpoint,
		"--role-name", name, "--query", "Role.Arn", "--output", "text", "--assume-role-policy-document",
		`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"lambda.amazonaws.com"},"Action":"sts:AssumeRole"}]}`).Output()
	if err != nil {
		t.Fatalf("aws iam create-role: %v", err)
	}
	e.role = strings.TrimSpace(string(out))
	return e
}

// deploy creates s on the local endpoints under a fresh name and returns
// what sluice doctor is pointed at.
func (e *env) deploy(t *testing.T, s spec) doctor.Target {
	t.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("doc%d", time.Now().UnixNano())
	_, dlqARN := e.queue(t, id+"-dlq", map[string]string{"MessageRetentionPeriod": fmt.Sprint(s.dlqRetention)})
	qa := map[string]string{"VisibilityTimeout": fmt.Sprint(s.visibility), "MessageRetentionPeriod": fmt.Sprint(s.retention)}
	if s.maxReceive > 0 {
		qa["RedrivePolicy"] = fmt.Sprintf(`{"deadLetterTargetArn":%q,"maxReceiveCount":"%d"}`, dlqARN, s.maxReceive)
	}
	q, arn := e.queue(t, id, qa)
	fn := e.function(t, id+"-consumer", s.timeout, s.reserved, map[string]string{"SLUICE_SAFE_RATE": s.safeRate})
	ctl := e.function(t, id+"-controller", 60, s.controllerReserved, nil)
	m, err := e.c.Lambda.CreateEventSourceMapping(ctx, &lambda.CreateEventSourceMappingInput{FunctionName: aws.String(fn),
		EventSourceArn: aws.String(arn),
		ScalingConfig:  &lambdatypes.ScalingConfig{MaximumConcurrency: aws.Int32(s.mapConc)}})
	if err != nil {
		t.Fatalf("create mapping: %v", err)
	}
	attrs := storetest.SampleParams(id).Attrs(looptest.Sources())
	attrs["rate_ttl"] = s.rateTTL
	if err := e.c.Params.(*ddbloop.Store).WriteParams(ctx, id, attrs); err != nil {
		t.Fatal(err)
	}
	if s.alarm {
		if _, err := e.c.CloudWatch.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{AlarmName: aws.String(id + "-error"),
			Namespace: aws.String("Sluice"), MetricName: aws.String("LoopError"), Statistic: cwtypes.StatisticMaximum,
			Dimensions: []cwtypes.Dimension{{Name: aws.String("Loop"), Value: aws.String(id)}}, Period: aws.Int32(60),
			EvaluationPeriods: aws.Int32(1), Threshold: aws.Float64(1), ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanOrEqualToThreshold}); err != nil {
			t.Fatal(err)
		}
	}
	return doctor.Target{Loop: id, Queue: q, Function: fn, Mapping: aws.ToString(m.UUID), Controller: ctl, Schedule: "rate(1 minute)"}
}

// queue creates an SQS queue on moto, deleted when the test ends, and
// returns its URL and ARN.
func (e *env) queue(t *testing.T, name string, attrs map[string]string) (string, string) {
	t.Helper()
	ctx := context.Background()
	q, err := e.c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	t.Cleanup(func() { e.c.SQS.DeleteQueue(context.Background(), &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) })
	a, err := e.c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(q.QueueUrl), a.Attributes["QueueArn"]
}

// function creates a Lambda function on moto with reserved concurrency
// (none when reserved < 0).
func (e *env) function(t *testing.T, name string, timeout, reserved int32, vars map[string]string) string {
	t.Helper()
	ctx := context.Background()
	zip, err := os.ReadFile("testdata/bootstrap.zip")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Lambda.CreateFunction(ctx, &lambda.CreateFunctionInput{FunctionName: aws.String(name), Role: aws.String(e.role),
		Runtime: lambdatypes.RuntimeProvidedal2023, Handler: aws.String("bootstrap"), Timeout: aws.Int32(timeout),
		Code: &lambdatypes.FunctionCode{ZipFile: zip}, Environment: &lambdatypes.Environment{Variables: vars}}); err != nil {
		t.Fatalf("create function %s: %v", name, err)
	}
	t.Cleanup(func() {
		e.c.Lambda.DeleteFunction(context.Background(), &lambda.DeleteFunctionInput{FunctionName: aws.String(name)})
	})
	if reserved >= 0 {
		if _, err := e.c.Lambda.PutFunctionConcurrency(ctx, &lambda.PutFunctionConcurrencyInput{FunctionName: aws.String(name),
			ReservedConcurrentExecutions: aws.Int32(reserved)}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// TestDoctorLocal: a clean deployment on the local endpoints passes; each
// configuration that breaks one rule is reported by that rule alone, with
// its fix, whatever else is checked with it.
func TestDoctorLocal(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		rule   string
		breaks func(*spec)
		only   func(doctor.Target) doctor.Target // the part that alone checks the rule
	}{
		{"", func(*spec) {}, nil},
		{"visibility-timeout", func(s *spec) { s.visibility = 60 }, func(x doctor.Target) doctor.Target { return doctor.Target{Mapping: x.Mapping, Queue: x.Queue} }},
		{"max-receive-count", func(s *spec) { s.maxReceive = 2 }, func(x doctor.Target) doctor.Target { return doctor.Target{Queue: x.Queue} }},
		{"dlq-retention", func(s *spec) { s.dlqRetention = s.retention }, func(x doctor.Target) doctor.Target { return doctor.Target{Queue: x.Queue} }},
		{"maximum-concurrency", func(s *spec) { s.mapConc = 20 }, func(x doctor.Target) doctor.Target { return doctor.Target{Mapping: x.Mapping, Queue: x.Queue} }},
		{"rate-ttl", func(s *spec) { s.rateTTL = "1m30s" }, func(x doctor.Target) doctor.Target {
			return doctor.Target{Loop: x.Loop, Schedule: x.Schedule}
		}},
		{"alarms", func(s *spec) { s.alarm = false }, func(x doctor.Target) doctor.Target { return doctor.Target{Loop: x.Loop} }},
		{"safe-rate", func(s *spec) { s.safeRate = "5000" }, func(x doctor.Target) doctor.Target { return doctor.Target{Loop: x.Loop, Function: x.Function} }},
		{"controller-concurrency", func(s *spec) { s.controllerReserved = -1 }, func(x doctor.Target) doctor.Target { return doctor.Target{Controller: x.Controller} }},
	}
	for _, tt := range tests {
		t.Run(tt.rule, func(t *testing.T) {
			s := clean()
			tt.breaks(&s)
			target := e.deploy(t, s)
			targets := []doctor.Target{target}
			if tt.only != nil {
				targets = append(targets, tt.only(target))
			}
			for _, x := range targets {
				f, err := doctor.Gather(context.Background(), e.c, x)
				if err != nil {
					t.Fatalf("Gather(%+v) = %v", x, err)
				}
				got := doctor.Check(f)
				if tt.rule == "" {
					if len(got) != 0 {
						t.Errorf("clean deployment: findings %+v; want none", got)
					}
					continue
				}
				if len(got) != 1 || got[0].Rule != tt.rule || got[0].Fix == "" || !strings.Contains(got[0].Problem, " ") {
					t.Errorf("Check(%+v) = %+v; want one %s finding with its fix", x, got, tt.rule)
				}
			}
		})
	}
}

// TestFromStack: a stack's outputs and parameters, as template.yaml names
// them, become the target; its queue alone is then checked.
func TestFromStack(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cf := cloudformation.NewFromConfig(cfg)
	name := fmt.Sprintf("sluice-doctor-%d", time.Now().UnixNano())
	body := `{"Parameters":{"LoopId":{"Type":"String"},"ScheduleExpression":{"Type":"String"}},
"Resources":{"ConsumerQueue":{"Type":"AWS::SQS::Queue","Properties":{"VisibilityTimeout":60}}},
"Outputs":{"ConsumerQueueUrl":{"Value":{"Ref":"ConsumerQueue"}},"TableName":{"Value":"` + e.table + `"},"ControllerFunctionName":{"Value":"ctl"}}}`
	if _, err := cf.CreateStack(ctx, &cloudformation.CreateStackInput{StackName: aws.String(name), TemplateBody: aws.String(body),
		Parameters: []cftypes.Parameter{{ParameterKey: aws.String("LoopId"), ParameterValue: aws.String("orders")},
			{ParameterKey: aws.String("ScheduleExpression"), ParameterValue: aws.String("rate(5 minutes)")}}}); err != nil {
		t.Fatalf("create stack: %v", err)
	}
	t.Cleanup(func() {
		cf.DeleteStack(context.Background(), &cloudformation.DeleteStackInput{StackName: aws.String(name)})
	})
	target, table, err := doctor.FromStack(ctx, cf, name, doctor.Target{Controller: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if target.Loop != "orders" || target.Schedule != "rate(5 minutes)" || target.Controller != "mine" || !strings.Contains(target.Queue, "/") || table != e.table {
		t.Fatalf("FromStack = %+v, table %q; want loop orders, the schedule, the queue's URL, the flag's controller kept, table %s", target, table, e.table)
	}
	f, err := doctor.Gather(ctx, e.c, doctor.Target{Queue: target.Queue})
	if err != nil {
		t.Fatal(err)
	}
	if got := doctor.Check(f); len(got) != 1 || got[0].Rule != "redrive" {
		t.Errorf("the stack's queue without a redrive policy: findings %+v; want one redrive finding", got)
	}
}
