package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/sluice-dev/sluice/internal/doctor"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
)

// runDoctor is `sluice doctor`: the deployed configuration read through
// the AWS APIs and checked against the rules (internal/doctor); exit 1
// when any rule is broken.
func runDoctor(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice doctor", "sluice doctor [--stack NAME] [--loop ID] [--queue URL] [--function NAME] [--mapping UUID] [--controller NAME] [--schedule EXPR]",
		"Checks a deployment: the queue's visibility timeout against the function's timeout (6x), its\n"+
			"redrive policy's maxReceiveCount against throttling and the loop's longest hold, the DLQ's\n"+
			"retention against the source's, the mapping's MaximumConcurrency against the function's reserved\n"+
			"concurrency, rate_ttl against the schedule, the loop's alarms, the consumers' safe rate against the\n"+
			"allowed range and the controller's reserved concurrency. Each part alone checks what it can; a\n"+
			"mapping brings its function and queue; --stack reads them from a template.yaml stack's outputs and\n"+
			"parameters. Each finding comes with its fix; exit 1 when any.")
	fs.SetOutput(stderr)
	var t doctor.Target
	fs.StringVar(&t.Loop, "loop", "", "loop id (its PARAMS in --table)")
	fs.StringVar(&t.Queue, "queue", "", "the loop's SQS queue URL")
	fs.StringVar(&t.Function, "function", "", "the consumer Lambda function")
	fs.StringVar(&t.Mapping, "mapping", "", "the SQS event source mapping's UUID")
	fs.StringVar(&t.Controller, "controller", "", "the controller Lambda function")
	fs.StringVar(&t.Schedule, "schedule", "", "the controller's ScheduleExpression, e.g. 'rate(1 minute)'")
	stack := fs.String("stack", "", "a stack deployed from template.yaml: its outputs and parameters name the rest")
	table := fs.String("table", envOr("SLUICE_TABLE", ddbstore.DefaultTable), "DynamoDB table of the loop's PARAMS")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 || (t == (doctor.Target{}) && *stack == "") {
		fmt.Fprintln(stderr, "sluice doctor: name something to check (--loop, --queue, --function, --mapping, --controller)")
		return 2
	}
	ctx := context.Background()
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return fail(stderr, "sluice doctor", err, 1)
	}
	if *stack != "" {
		var stackTable string
		if t, stackTable, err = doctor.FromStack(ctx, cloudformation.NewFromConfig(cfg), *stack, t); err != nil {
			return fail(stderr, "sluice doctor", err, 1)
		}
		if stackTable != "" && !flagSet(fs, "table") {
			*table = stackTable
		}
	}
	c := doctor.Clients{SQS: sqs.NewFromConfig(cfg), Lambda: lambda.NewFromConfig(cfg),
		CloudWatch: cwmetric.NewClient(cfg, os.Getenv("AWS_ENDPOINT_URL")), Params: ddbloop.New(dynamodb.NewFromConfig(cfg), *table)}
	facts, err := doctor.Gather(ctx, c, t)
	if err != nil {
		return fail(stderr, "sluice doctor", err, 1)
	}
	findings := doctor.Check(facts)
	for _, f := range findings {
		fmt.Fprintf(stdout, "%s: %s\n  fix: %s\n", f.Rule, f.Problem, f.Fix)
	}
	if len(findings) > 0 {
		fmt.Fprintf(stdout, "%d findings\n", len(findings))
		return 1
	}
	fmt.Fprintln(stdout, "no findings: every rule that applies holds")
	return 0
}
