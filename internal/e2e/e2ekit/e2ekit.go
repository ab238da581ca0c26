// Package e2ekit holds what the end-to-end harnesses (internal/e2e/full,
// replica, tune, controller, samdeploy) and the benchmarks share: the
// run's skeleton (log, failures, cleanups, timeout, the JSON line's
// verdict) and the harness around it (Harness: the run with its flags and
// result, whose Execute returns the exit code the main exits with), their
// common flags, the local stack's environment, the run's database, table
// and queues, the functions under the RIE and where the emulator is, the
// CPU publisher and record, the AWS CLI as an operator uses it on PARAMS,
// the orders the producers send and the consumers write, and the rounding
// of the figures of the JSON line (Round).
package e2ekit

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/cpupub"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
)

// Run is the skeleton of a harness: its log on stderr, the failures of its
// checks, and what to undo at the end, last first.
type Run struct {
	// Name prefixes every log line.
	Name  string
	Start time.Time
	// Ctx ends at the timeout or on SIGINT/SIGTERM (set by Main).
	Ctx      context.Context
	Failures []string
	// Ticks and TickErrors count the controller's invocations
	// (StartFunctions).
	Ticks, TickErrors atomic.Int64
	cleanups          []func()
}

// Logf logs a line with the seconds since Start.
func (r *Run) Logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "%s %6.1fs: %s\n", r.Name, time.Since(r.Start).Seconds(), fmt.Sprintf(format, a...))
}

// Fail logs and records a failed check.
func (r *Run) Fail(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	r.Logf("FAIL: %s", msg)
	r.Failures = append(r.Failures, msg)
}

// Defer adds f to what the end of the run undoes.
func (r *Run) Defer(f func()) { r.cleanups = append(r.cleanups, f) }

// Main runs setup then scenario within timeout, undoes what was deferred,
// and returns the exit code: 1 when setup failed or a check did.
func (r *Run) Main(timeout time.Duration, setup, scenario func() error) int {
	sig, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(sig, timeout)
	defer cancel()
	r.Ctx = ctx
	defer func() {
		for i := len(r.cleanups) - 1; i >= 0; i-- {
			r.cleanups[i]()
		}
	}()
	if err := setup(); err != nil {
		r.Fail("setup: %v", err)
		return 1
	}
	if err := scenario(); err != nil {
		r.Fail("%v", err)
	}
	if len(r.Failures) > 0 {
		return 1
	}
	return 0
}

// Sleep waits d or until the run ends.
func (r *Run) Sleep(d time.Duration) {
	select {
	case <-r.Ctx.Done():
	case <-time.After(d):
	}
}

// Every calls f every period until ctx ends.
func Every(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f()
	}
}

// SQSOnMoto reports whether SQS is served by moto_server (SLUICE_SQS=moto)
// rather than ElasticMQ.
func SQSOnMoto() bool { return os.Getenv("SLUICE_SQS") == "moto" }

// SetDefaultEnv sets the local stack's environment
// (localstack/stack/env.sh) where the caller did not.
func SetDefaultEnv() {
	sqsEndpoint := "http://127.0.0.1:9324"
	if SQSOnMoto() {
		sqsEndpoint = "http://127.0.0.1:4566"
	}
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": "http://127.0.0.1:4566", "AWS_ENDPOINT_URL_SQS": sqsEndpoint,
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
		"AWS_REGION": "us-east-1", "AWS_DEFAULT_REGION": "us-east-1", "AWS_PAGER": "", "MOTO_ACCOUNT_ID": "000000000000",
		"SLUICE_MYSQL_DSN": "sluice:sluice@tcp(127.0.0.1:3306)/sluice?parseTime=true&multiStatements=true",
	} {
		if _, ok := os.LookupEnv(k); !ok {
			os.Setenv(k, v)
		}
	}
}

// StartStack starts services and the SQS server (ElasticMQ, or none
// under SLUICE_SQS=moto: moto serves SQS) with localstack/stack/up.sh,
// recording what it started in rec, and defers stopping exactly that
// (down.sh).
func (r *Run) StartStack(rec string, services ...string) error {
	if !SQSOnMoto() {
		services = append(services, "elasticmq")
	}
	up := exec.CommandContext(r.Ctx, "bash", append([]string{"localstack/stack/up.sh", "--record", rec}, services...)...)
	up.Stdout, up.Stderr = os.Stderr, os.Stderr
	if err := up.Run(); err != nil {
		return fmt.Errorf("localstack/stack/up.sh: %w", err)
	}
	r.Defer(func() {
		b, _ := os.ReadFile(rec)
		os.Remove(rec)
		if svc := strings.Fields(string(b)); len(svc) > 0 {
			r.Logf("stopping what this run started: %v", svc)
			down := exec.Command("bash", append([]string{"localstack/stack/down.sh"}, svc...)...)
			down.Stdout, down.Stderr = os.Stderr, os.Stderr
			_ = down.Run()
		}
	})
	return nil
}

// ListenerPID is the pid of the process listening on TCP port (ss).
func ListenerPID(port string) (int, error) {
	out, err := exec.Command("ss", "-Hltnp", "sport = :"+port).Output()
	if err == nil {
		if _, rest, ok := strings.Cut(string(out), "pid="); ok {
			var pid int
			if _, err := fmt.Sscan(strings.SplitN(rest, ",", 2)[0], &pid); err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process listens on port %s (ss: %v)", port, err)
}

// MariaDBPID is the pid of the MariaDB server at addr (host:port, port
// 3306 when it names none): the process listening on its port, else the
// one named mariadbd.
func MariaDBPID(addr string) (int, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		port = "3306"
	}
	if pid, err := ListenerPID(port); err == nil {
		return pid, nil
	}
	return cpupub.Named("mariadbd")()
}

// AWS runs the AWS CLI against the local endpoint.
func AWS(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "aws", append([]string{"--endpoint-url", os.Getenv("AWS_ENDPOINT_URL"), "--output", "json"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("aws %s: %w: %s", strings.Join(args[:min(2, len(args))], " "), err, out)
	}
	return nil
}

// Key is the DynamoDB JSON key of item (pk, sk).
func Key(pk, sk string) string {
	return fmt.Sprintf(`{"pk":{"S":%q},"sk":{"S":%q}}`, pk, sk)
}

// PutParams writes a loop's PARAMS item with the aws CLI, as an operator
// would.
func PutParams(ctx context.Context, table string, p loop.Params) error {
	item := map[string]any{"pk": map[string]string{"S": p.Loop}, "sk": map[string]string{"S": "PARAMS"}}
	for k, v := range p.Attrs(looptest.Sources()) {
		item[k] = DDBJSON(v)
	}
	b, err := json.Marshal(item)
	if err != nil {
		return err
	}
	return AWS(ctx, "dynamodb", "put-item", "--table-name", table, "--item", string(b))
}

// SetParam edits one PARAMS attribute with update-item; ddbValue is
// DynamoDB JSON ({"N":"12"}).
func SetParam(ctx context.Context, table, loopID, name, ddbValue string) error {
	return AWS(ctx, "dynamodb", "update-item", "--table-name", table, "--key", Key(loopID, "PARAMS"),
		"--update-expression", "SET #a = :v", "--expression-attribute-names", fmt.Sprintf(`{"#a":%q}`, name),
		"--expression-attribute-values", fmt.Sprintf(`{":v":%s}`, ddbValue))
}

// DDBJSON converts an attribute of Params.Attrs to DynamoDB JSON.
func DDBJSON(v any) any {
	switch v := v.(type) {
	case string:
		return map[string]any{"S": v}
	case bool:
		return map[string]any{"BOOL": v}
	case float64:
		return map[string]any{"N": fmt.Sprint(v)}
	case int:
		return map[string]any{"N": fmt.Sprint(v)}
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			m[k] = DDBJSON(x)
		}
		return map[string]any{"M": m}
	case map[string]string:
		m := map[string]any{}
		for k, x := range v {
			m[k] = map[string]any{"S": x}
		}
		return map[string]any{"M": m}
	case []any:
		l := []any{}
		for _, x := range v {
			l = append(l, DDBJSON(x))
		}
		return map[string]any{"L": l}
	case nil:
		return map[string]any{"NULL": true}
	}
	return map[string]any{"S": fmt.Sprint(v)}
}

// QueueAPI is what KeepBacklog and SendEntries use of the SQS client.
type QueueAPI interface {
	GetQueueAttributes(context.Context, *sqs.GetQueueAttributesInput, ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
}

// KeepBacklog keeps about target messages in the queue until ctx ends,
// calling send(n) with n <= 10 for what is missing, every half second: the
// producers outpace the loop, so the rate is the loop's.
func KeepBacklog(ctx context.Context, api QueueAPI, queueURL string, target int, send func(n int)) {
	for ctx.Err() == nil {
		out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(queueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages}})
		depth := target
		if err == nil {
			fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], &depth)
		}
		for n := target - depth; n > 0 && ctx.Err() == nil; n -= 10 {
			send(min(n, 10))
		}
		_ = (consume.WallClock{}).Sleep(ctx, 500*time.Millisecond)
	}
}

// SendEntries sends a batch, retrying the entries SQS did not take and
// failed calls (up to 20 times).
func SendEntries(ctx context.Context, api QueueAPI, queueURL string, entries []sqstypes.SendMessageBatchRequestEntry) error {
	for attempt := 0; len(entries) > 0; attempt++ {
		out, err := api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
		if err != nil {
			if attempt > 20 {
				return fmt.Errorf("send: %w", err)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var again []sqstypes.SendMessageBatchRequestEntry
		for _, f := range out.Failed {
			for _, e := range entries {
				if aws.ToString(e.Id) == aws.ToString(f.Id) {
					again = append(again, e)
				}
			}
		}
		entries = again
	}
	return nil
}

// Round is x rounded to digits decimal places, as the harnesses write
// their figures in the JSON last line: Round(2.345, 2) = 2.35 (half away
// from zero), Round(1234, -2) = 1200.
func Round(x float64, digits int) float64 {
	if digits < 0 {
		unit := math.Pow10(-digits)
		return math.Round(x/unit) * unit
	}
	unit := math.Pow10(digits)
	return math.Round(x*unit) / unit
}
