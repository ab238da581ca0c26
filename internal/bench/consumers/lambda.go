package consumers

import (
	"bytes"
	"context"
	"crypto/md5"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

// RIE is a Lambda bootstrap running under the Runtime Interface Emulator.
type RIE struct {
	cmd *exec.Cmd
	URL string // invocation URL
}

// StartRIE starts bootstrap under the emulator with env, on free ports, and
// waits until it accepts connections.
func (e Env) StartRIE(ctx context.Context, bootstrap string, env map[string]string, log io.Writer) (*RIE, error) {
	args, p1, err := harness.RIEArgs(bootstrap)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(e.RIE, args...)
	cmd.Env = e.childEnv(env)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", e.RIE, err)
	}
	r := &RIE{cmd: cmd, URL: fmt.Sprintf("http://127.0.0.1:%d/2015-03-31/functions/function/invocations", p1)}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := waitUntil(wctx, func() (bool, error) {
		c, err := (&netDialer{}).dial("127.0.0.1:" + strconv.Itoa(p1))
		if err == nil {
			c.Close()
		}
		return err == nil, nil
	}); err != nil {
		r.Stop()
		return nil, fmt.Errorf("emulator did not start: %w", err)
	}
	return r, nil
}

// Stop ends the emulator and its bootstrap.
func (r *RIE) Stop() {
	if r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

// Invoke sends one event and decodes the SQS response. A function error
// (or a response that is no SQSEventResponse) is an error: the event source
// mapping then retries the whole batch.
func (r *RIE) Invoke(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	b, err := json.Marshal(ev)
	if err != nil {
		return resp, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(b))
	if err != nil {
		return resp, err
	}
	hr, err := http.DefaultClient.Do(req)
	if err != nil {
		return resp, fmt.Errorf("invoke: %w", err)
	}
	defer hr.Body.Close()
	body, _ := io.ReadAll(hr.Body)
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(body, &probe); err != nil {
		return resp, fmt.Errorf("invoke: response %q: %w", body, err)
	}
	if _, ok := probe["errorMessage"]; ok {
		return resp, fmt.Errorf("function error: %s", body)
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return resp, fmt.Errorf("invoke: decode %s: %w", body, err)
	}
	return resp, nil
}

// ToEvent builds the SQS event record the event source mapping would send
// for an SDK message.
func ToEvent(m types.Message, arn string) events.SQSMessage {
	sum := md5.Sum([]byte(aws.ToString(m.Body)))
	ev := events.SQSMessage{
		MessageId: aws.ToString(m.MessageId), ReceiptHandle: aws.ToString(m.ReceiptHandle), Body: aws.ToString(m.Body),
		Md5OfBody: hex.EncodeToString(sum[:]), Attributes: m.Attributes, MessageAttributes: map[string]events.SQSMessageAttribute{},
		EventSource: "aws:sqs", EventSourceARN: arn, AWSRegion: "us-east-1",
	}
	for k, v := range m.MessageAttributes {
		ev.MessageAttributes[k] = events.SQSMessageAttribute{DataType: aws.ToString(v.DataType), StringValue: v.StringValue}
	}
	return ev
}

// Mapping emulates an SQS event source mapping with ReportBatchItemFailures:
// it receives batches, invokes the function, deletes the records that are
// not batch item failures, and leaves the failures to come back after the
// visibility timeout (the queue's redrive policy then moves the poison).
type Mapping struct {
	SQS                                   *sqs.Client
	QueueURL                              string
	ARN                                   string
	Visibility                            time.Duration
	Invocations, FunctionErrors, Failures atomic.Int64
}

// Run polls until ctx ends.
func (m *Mapping) Run(ctx context.Context, fn *RIE) {
	for ctx.Err() == nil {
		msgs, ev, ok := ReceiveEvent(ctx, m.SQS, m.QueueURL, m.ARN, m.Visibility)
		if !ok {
			continue
		}
		m.Invocations.Add(1)
		ictx, cancel := context.WithTimeout(ctx, 2*m.Visibility)
		resp, err := fn.Invoke(ictx, ev)
		cancel()
		if err != nil {
			m.FunctionErrors.Add(1)
			continue // the whole batch comes back after its visibility timeout
		}
		m.Failures.Add(int64(Settle(ctx, m.SQS, m.QueueURL, msgs, resp)))
	}
}

// SQSLambda is the sqs-lambda no-loss scenario: the real bootstrap under the
// emulator, fed by an emulated event source mapping from a real queue,
// storing into MariaDB; MariaDB is restarted once a third of the messages are
// stored (when MariaDBCtl is set); every PoisonEvery-th message is malformed
// and must end in the DLQ with its reason.
func SQSLambda(ctx context.Context, e Env, o Options) (NoLoss, error) {
	return e.noLoss(ctx, o, "sqs-lambda", "lambda", "./functions/sqs-consumer", "bootstrap", e.sqsLambda)
}

// sqsLambda sends the messages, runs the mapping and restarts MariaDB
// until the queue is drained; it returns the poison sequence numbers.
func (e Env) sqsLambda(ctx context.Context, rg *rig, o Options, res *NoLoss) (map[int]bool, error) {
	db, st := rg.db, rg.st
	fn, err := e.StartRIE(ctx, rg.bin, map[string]string{
		"SLUICE_LOOP": st.Loop, "SLUICE_TABLE": st.Table, "SLUICE_SINK": "mysql", "SLUICE_MYSQL_DSN": rg.dsn,
		"SLUICE_DLQ_URL": st.DLQURL, "SLUICE_SAFE_RATE": "50", "AWS_LAMBDA_FUNCTION_TIMEOUT": "30",
	}, rg.log)
	if err != nil {
		return nil, err
	}
	defer fn.Stop()

	poison, err := Produce(ctx, st.SQS, st.QueueURL, o.Messages, o.PoisonEvery)
	if err != nil {
		return nil, err
	}
	mctx, mstop := context.WithCancel(ctx)
	defer mstop()
	mp := &Mapping{SQS: st.SQS, QueueURL: st.QueueURL, ARN: st.QueueARN, Visibility: 3 * time.Second}
	done := make(chan struct{})
	go func() { mp.Run(mctx, fn); close(done) }()

	if err := e.restartMariaDBAfter(ctx, db, o.Messages/3, res); err != nil {
		return nil, err
	}
	err = rg.drained(ctx)
	mstop()
	<-done
	if err != nil {
		return nil, err
	}
	return poison, nil
}

// restartMariaDBAfter waits until n rows are stored, then restarts MariaDB
// with MariaDBCtl (when set) and records the fault.
func (e Env) restartMariaDBAfter(ctx context.Context, db *sql.DB, n int, res *NoLoss) error {
	if e.MariaDBCtl == "" {
		return nil
	}
	if err := waitUntil(ctx, func() (bool, error) { return rows(ctx, db) >= n, nil }); err != nil {
		return fmt.Errorf("waiting for %d rows: %w", n, err)
	}
	e.Log.Info("fault: restarting MariaDB", "rows", rows(ctx, db))
	if b, err := exec.CommandContext(ctx, e.MariaDBCtl, "restart").CombinedOutput(); err != nil {
		return fmt.Errorf("%s restart: %w\n%s", e.MariaDBCtl, err, b)
	}
	res.Faults = append(res.Faults, "mariadb restarted")
	return nil
}

func rows(ctx context.Context, db *sql.DB) int {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM messages").Scan(&n); err != nil {
		return -1
	}
	return n
}

// finish counts the table and the DLQ.
func finish(ctx context.Context, e Env, db *sql.DB, st *Stack, o Options, poison map[int]bool, res NoLoss, start time.Time) (NoLoss, error) {
	copies, withReason, err := DeadLetters(ctx, st.SQS, st.DLQURL, HasReason)
	if err != nil {
		return res, err
	}
	dead := map[int]bool{}
	for seq := range copies {
		dead[seq] = true
	}
	var c mysqltest.Counts
	if err := waitUntil(ctx, func() (bool, error) {
		var err error
		c, err = mysqltest.Count(ctx, db, o.Messages, dead)
		return err == nil, nil
	}); err != nil {
		return res, fmt.Errorf("count rows: %w", err)
	}
	res.Stored, res.Duplicates, res.Missing = c.Stored, c.Duplicates, c.Missing
	res.Poison, res.PoisonWithReason = len(dead), withReason
	for seq := range dead {
		if !poison[seq] {
			e.Log.Warn("a good message ended in the DLQ", "seq", seq)
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}
