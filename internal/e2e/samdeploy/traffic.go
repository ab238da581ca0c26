package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
)

// batchSize is how many messages the batch sends through the queue.
const batchSize = 5

// tickResult is the part of the controller's response checked here.
type tickResult struct {
	Applied map[string]int64 `json:"applied"`
}

// tick gives the deployed table a loop (localstack/init/10-controller.sh, as
// a user would) and a CPU datapoint, then invokes the target of the deployed
// schedule rule with a scheduled event of that rule, and checks that the
// loop ticked and RATE was written.
func (r *runner) tick(d *deployment, st stackInfo, fns map[string]*function) error {
	rules := st.ofType("AWS::Events::Rule")
	if len(rules) != 1 {
		return fmt.Errorf("%d schedule rules deployed; want 1", len(rules))
	}
	var rule struct {
		Arn string `json:"Arn"`
	}
	var targets struct {
		Targets []struct {
			Arn string `json:"Arn"`
		} `json:"Targets"`
	}
	if err := r.aws(d, &rule, "events", "describe-rule", "--name", rules[0].Physical); err != nil {
		return err
	}
	if err := r.aws(d, &targets, "events", "list-targets-by-rule", "--rule", rules[0].Physical); err != nil {
		return err
	}
	if len(targets.Targets) != 1 {
		return fmt.Errorf("rule %s has %d targets; want 1", rules[0].Physical, len(targets.Targets))
	}
	fn, err := target(fns, targets.Targets[0].Arn)
	if err != nil {
		return err
	}
	if err := r.seedLoop(d); err != nil {
		return err
	}
	ev := events.EventBridgeEvent{Version: "0", ID: d.stack + "-tick", DetailType: "Scheduled Event", Source: "aws.events",
		AccountID: "000000000000", Time: time.Now().UTC(), Region: os.Getenv("AWS_REGION"), Resources: []string{rule.Arn}, Detail: json.RawMessage("{}")}
	var res tickResult
	if err := invoke(r, fn, ev, &res); err != nil {
		return err
	}
	if res.Applied[d.loop] < 1 {
		return fmt.Errorf("loop %s not applied: %+v", d.loop, res)
	}
	cfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return err
	}
	rate, err := ddbstore.New(dynamodb.NewFromConfig(cfg), d.table).ReadRate(r.Ctx, d.loop)
	if err != nil {
		return fmt.Errorf("RATE after the tick: %w", err)
	}
	r.Logf("tick through rule %s: loop %s at %.1f messages/s", rules[0].Physical, d.loop, rate.PerSecond)
	return nil
}

// seedLoop writes the loop's PARAMS with the project's init script and
// publishes one CPU datapoint of its database.
func (r *runner) seedLoop(d *deployment) error {
	cmd := exec.CommandContext(r.Ctx, "bash", "localstack/init/10-controller.sh")
	cmd.Env = append(os.Environ(), "SLUICE_TABLE="+d.table, "SLUICE_LOOP="+d.loop, "SLUICE_DB_INSTANCE="+d.db)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("init script: %v: %s", err, out)
	}
	cfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return err
	}
	cw := cwmetric.NewClient(cfg, os.Getenv("AWS_ENDPOINT_URL"))
	_, err = cw.PutMetricData(r.Ctx, &cloudwatch.PutMetricDataInput{
		Namespace: aws.String("AWS/RDS"),
		MetricData: []cwtypes.MetricDatum{{
			MetricName: aws.String("CPUUtilization"),
			Dimensions: []cwtypes.Dimension{{Name: aws.String("DBInstanceIdentifier"), Value: aws.String(d.db)}},
			Timestamp:  aws.Time(time.Now().Add(-90 * time.Second)),
			Value:      aws.Float64(40),
		}},
	})
	if err != nil {
		return fmt.Errorf("publish CPU: %w", err)
	}
	return nil
}

// mapping is the part of an event source mapping used here.
type mapping struct {
	UUID           string `json:"UUID"`
	EventSourceArn string `json:"EventSourceArn"`
	FunctionArn    string `json:"FunctionArn"`
}

// batch sends messages to the queue of the deployed event source mapping,
// receives them as the mapping's poller would, invokes the mapped function
// with them as one SQS event, deletes what it stored and checks the rows in
// MariaDB; it returns the rows found.
func (r *runner) batch(d *deployment, fns map[string]*function) (int, error) {
	var list struct {
		Mappings []mapping `json:"EventSourceMappings"`
	}
	if err := r.aws(d, &list, "lambda", "list-event-source-mappings"); err != nil {
		return 0, err
	}
	var m *mapping
	for i, em := range list.Mappings {
		if strings.HasSuffix(em.EventSourceArn, ":"+d.queue) {
			m = &list.Mappings[i]
		}
	}
	if m == nil {
		return 0, fmt.Errorf("no event source mapping of the queue %s", d.queue)
	}
	fn, err := target(fns, m.FunctionArn)
	if err != nil {
		return 0, err
	}
	// This run is the mapping's poller: moto's own would take the
	// messages first and invoke a function it cannot run.
	if err := r.aws(d, nil, "lambda", "update-event-source-mapping", "--uuid", m.UUID, "--no-enabled"); err != nil {
		return 0, err
	}
	msgs, queueURL, err := r.sendAndReceive(d)
	if err != nil {
		return 0, err
	}
	ev := events.SQSEvent{}
	ids := make([]any, 0, len(msgs))
	for _, msg := range msgs {
		ids = append(ids, aws.ToString(msg.MessageId))
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(msg.MessageId), ReceiptHandle: aws.ToString(msg.ReceiptHandle), Body: aws.ToString(msg.Body),
			Attributes: msg.Attributes, EventSource: "aws:sqs", EventSourceARN: m.EventSourceArn, AWSRegion: os.Getenv("AWS_REGION"),
		})
	}
	var resp events.SQSEventResponse
	if err := invoke(r, fn, ev, &resp); err != nil {
		return 0, err
	}
	if len(resp.BatchItemFailures) > 0 {
		return 0, fmt.Errorf("%d of %d messages failed: %+v", len(resp.BatchItemFailures), len(msgs), resp.BatchItemFailures)
	}
	if err := r.deleteMessages(queueURL, msgs); err != nil {
		return 0, err
	}
	return r.checkRows(d, ids)
}

// sqsClient is an SQS client of the endpoint that holds the stack's queues
// (AWS_ENDPOINT_URL_SQS may name another SQS for the other tests).
func (r *runner) sqsClient() (*sqs.Client, error) {
	cfg, err := awsconf.Load(r.Ctx)
	if err != nil {
		return nil, err
	}
	return sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(os.Getenv("AWS_ENDPOINT_URL")) }), nil
}

func (r *runner) sendAndReceive(d *deployment) ([]sqstypes.Message, string, error) {
	c, err := r.sqsClient()
	if err != nil {
		return nil, "", err
	}
	q, err := c.GetQueueUrl(r.Ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(d.queue)})
	if err != nil {
		return nil, "", fmt.Errorf("queue %s: %w", d.queue, err)
	}
	for i := range batchSize {
		body := fmt.Sprintf(`{"order":%d,"stack":%q}`, i, d.stack)
		if _, err := c.SendMessage(r.Ctx, &sqs.SendMessageInput{QueueUrl: q.QueueUrl, MessageBody: aws.String(body)}); err != nil {
			return nil, "", fmt.Errorf("send: %w", err)
		}
	}
	var got []sqstypes.Message
	for attempt := 0; len(got) < batchSize && attempt < 20; attempt++ {
		out, err := c.ReceiveMessage(r.Ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: int32(batchSize - len(got)),
			WaitTimeSeconds: 1, VisibilityTimeout: 120, MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll}})
		if err != nil {
			return nil, "", fmt.Errorf("receive: %w", err)
		}
		got = append(got, out.Messages...)
	}
	if len(got) != batchSize {
		return nil, "", fmt.Errorf("received %d of %d messages", len(got), batchSize)
	}
	return got, aws.ToString(q.QueueUrl), nil
}

func (r *runner) deleteMessages(queueURL string, msgs []sqstypes.Message) error {
	c, err := r.sqsClient()
	if err != nil {
		return err
	}
	var entries []sqstypes.DeleteMessageBatchRequestEntry
	for i, m := range msgs {
		entries = append(entries, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle})
	}
	out, err := c.DeleteMessageBatch(r.Ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
	if err != nil {
		return fmt.Errorf("delete the stored messages: %w", err)
	}
	if len(out.Failed) > 0 {
		return fmt.Errorf("delete the stored messages: %d failed", len(out.Failed))
	}
	return nil
}

// checkRows counts the batch's rows in MariaDB, then removes them.
func (r *runner) checkRows(d *deployment, ids []any) (int, error) {
	db, err := sql.Open("mysql", d.dsn)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	in := strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")
	var n int
	if err := db.QueryRowContext(r.Ctx, "SELECT COUNT(*) FROM messages WHERE id IN ("+in+")", ids...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the stored rows: %w", err)
	}
	db.ExecContext(r.Ctx, "DELETE FROM messages WHERE id IN ("+in+")", ids...)
	if n != len(ids) {
		return n, fmt.Errorf("%d of %d messages are rows in MariaDB", n, len(ids))
	}
	return n, nil
}
