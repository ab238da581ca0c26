package chaos

import (
	"context"
	"fmt"
	"maps"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/bench/consumers"
	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// Path names.
const (
	PathLambda    = "sqs-lambda"
	PathSQSWorker = "sqs-worker"
)

// Scenario is one fault played on one path.
type Scenario struct {
	Name     string
	Path     string
	Messages int
	// Rate is the allowed aggregate rate at the start (messages/s).
	Rate float64
	// Schedule is the destination's answers from the start.
	Schedule []Phase
	// Sink is "http" (the controlled destination, default) or "mysql" (a
	// private MariaDB the scenario may stop).
	Sink string
	// FunctionTimeout is the Lambda's timeout (default 30 s).
	FunctionTimeout time.Duration
	// MaxReceive is the queue's maxReceiveCount (default 5).
	MaxReceive int
	// Fault runs beside the consumers once the messages are sent (set the
	// rate, signal the worker); it returns the faults it injected.
	Fault func(ctx context.Context, r *Run) ([]string, error)
	// Limit bounds the scenario (default 30 min).
	Limit time.Duration
	// Proxy puts an SQSProxy between the consumers and the SQS server
	// (Run.SQSProxy), for faults of SQS itself.
	Proxy bool
	// Schema, with Sink mysql, is run on the private MariaDB before the
	// consumers start, and Statement is their SLUICE_MYSQL_STATEMENT; Body
	// makes the messages' bodies (default: bodyFor).
	Schema    []string
	Statement string
	Body      func(seq int, poison bool) string
	// Silent puts a SilentProxy between the consumers and the destination
	// (HTTP, or MySQL with Sink mysql), DynamoDB and SQS (Run.Silent).
	Silent bool
	// Env is added to the consumers' environment.
	Env map[string]string
}

// Run is a scenario in progress: what a Fault may act on.
type Run struct {
	Stack  *consumers.Stack
	Dest   *Destination
	DB     *MariaDB          // nil unless Sink is mysql
	Worker *consumers.Worker // nil on the Lambda path
	// sw is the stand-in mapping's Enabled on the Lambda path (pause.go).
	sw *standIn
	// emf reads the function's EMF lines on the Lambda path.
	emf *emfCounter
	// Extra is what the fault measured, reported in Result.Extra.
	Extra map[string]any
	// SQSProxy is the consumers' SQS endpoint when the scenario asks for
	// one (Scenario.Proxy); nil otherwise.
	SQSProxy *SQSProxy
	// Silent are the SilentProxy in front of the destination ("http" or
	// "mysql"), DynamoDB ("dynamodb") and SQS ("sqs") when the scenario
	// asks for them.
	Silent map[string]*SilentProxy
}

// SetRate writes the loop's RATE (a manual rate, as an operator's pause).
func (r *Run) SetRate(ctx context.Context, perSecond float64) error {
	now := time.Now()
	return ddbstore.New(r.Stack.DDB, r.Stack.Table).WriteRate(ctx, protocol.Rate{
		Loop: r.Stack.Loop, PerSecond: perSecond, WrittenAt: now, ExpiresAt: now.Add(24 * time.Hour),
	})
}

// limit is the scenario's time limit: Limit, or 30 minutes.
func (sc Scenario) limit() time.Duration { return defaults.Positive(sc.Limit, 30*time.Minute) }

// Play runs sc on its path; bins holds the built "bootstrap" and "worker".
func Play(ctx context.Context, e consumers.Env, bins map[string]string, sc Scenario) Result {
	sc.Limit = sc.limit()
	sc.MaxReceive = defaults.Positive(sc.MaxReceive, 5)
	sc.FunctionTimeout = defaults.Positive(sc.FunctionTimeout, 30*time.Second)
	start := time.Now()
	r := Result{Name: sc.Name, Path: sc.Path, Sent: sc.Messages}
	ctx, cancel := context.WithTimeout(ctx, sc.Limit)
	defer cancel()
	if err := play(ctx, e, bins, sc, &r); err != nil {
		r.Error = err.Error()
	}
	r.Seconds = time.Since(start).Seconds()
	r.check()
	return r
}

func play(ctx context.Context, e consumers.Env, bins map[string]string, sc Scenario, r *Result) error {
	prefix := fmt.Sprintf("chaos-%s-%s-%d", sc.Name, sc.Path, time.Now().UnixNano()%1e9)
	st, err := e.NewStack(ctx, prefix, sc.Rate, sc.MaxReceive)
	if err != nil {
		return err
	}
	defer st.Close()
	dest := NewDestination(sc.Schedule)
	srv := httptest.NewServer(dest)
	defer srv.Close()
	logf, err := os.Create(filepath.Join(e.WorkDir, prefix+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	run := &Run{Stack: st, Dest: dest, Extra: map[string]any{}, sw: &standIn{}, emf: &emfCounter{next: logf}}
	env := consumerEnv(st, srv.URL)
	maps.Copy(env, sc.Env)
	if sc.Sink == "mysql" {
		if run.DB, err = privateMariaDB(ctx, prefix); err != nil {
			return err
		}
		defer run.DB.Close()
		env["SLUICE_SINK"], env["SLUICE_MYSQL_DSN"] = "mysql", run.DB.DSN()
		env["SLUICE_MIGRATE"] = "on" // the worker migrates only when asked
		if err := run.DB.Exec(ctx, sc.Schema...); err != nil {
			return err
		}
		if sc.Statement != "" {
			env["SLUICE_MYSQL_STATEMENT"] = sc.Statement
		}
	}
	if sc.Proxy {
		stopProxy, err := startSQSProxy(e, run, env)
		if err != nil {
			return err
		}
		defer stopProxy()
	}
	if sc.Silent {
		stopSilent, err := startSilent(e, run, env, srv.URL)
		if err != nil {
			return err
		}
		defer stopSilent()
	}
	if r.Poison, err = Produce(ctx, st.SQS, st.QueueURL, sc.Sink, sc.Messages, sc.Body); err != nil {
		return err
	}
	dest.Restart(sc.Schedule) // the schedule starts once the queue is full
	stop, err := startPath(ctx, e, bins, sc, env, logf, run, r)
	if err != nil {
		return err
	}
	if sc.Fault != nil {
		faults, err := sc.Fault(ctx, run)
		r.Faults = append(r.Faults, faults...)
		for k, v := range run.Extra {
			if r.Extra == nil {
				r.Extra = map[string]any{}
			}
			r.Extra[k] = v
		}
		if err != nil {
			stop()
			return fmt.Errorf("fault: %w", err)
		}
	}
	err = drained(ctx, st.SQS, st.QueueURL)
	stop()
	if err != nil {
		return err
	}
	return tally(ctx, st, dest, run.DB, r)
}

// privateMariaDB starts a MariaDB of the scenario's own (never the shared
// one: the scenario stops it) in a fresh directory under the system's
// temporary directory: mariadbd runs as the user mysql, which cannot reach
// a checkout whose parents are private to root (a CI clone under
// `mktemp -d`, for one).
func privateMariaDB(ctx context.Context, prefix string) (*MariaDB, error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "sluice-chaos-"+prefix+"-")
	if err != nil {
		return nil, err
	}
	return StartMariaDB(ctx, dir, port)
}

// consumerEnv is the environment of every SQS scenario's consumers on
// stack st, storing to the destination at url. ElasticMQ answers
// GetQueueAttributes without MessageRetentionPeriod (AWS always reports
// it), so the SQS Lambda is told the retention of the stack's queues
// (SLUICE_QUEUE_RETENTION; the worker does not read it): without it the
// open circuit's visibility falls back to the retry backoff.
func consumerEnv(st *consumers.Stack, url string) map[string]string {
	return map[string]string{
		"SLUICE_LOOP": st.Loop, "SLUICE_TABLE": st.Table, "SLUICE_SINK": "http", "SLUICE_HTTP_ENDPOINTS": url,
		"SLUICE_DLQ_URL": st.DLQURL, "SLUICE_QUEUE_URL": st.QueueURL, "SLUICE_SAFE_RATE": "10",
		"SLUICE_QUEUE_RETENTION": consumers.DefaultQueueRetention.String(),
	}
}

// startPath starts the consumers of sc.Path and returns what stops them.
func startPath(ctx context.Context, e consumers.Env, bins map[string]string, sc Scenario, env map[string]string, logf *os.File, run *Run, r *Result) (func(), error) {
	switch sc.Path {
	case PathLambda:
		env["AWS_LAMBDA_FUNCTION_TIMEOUT"] = strconv.Itoa(int(sc.FunctionTimeout / time.Second))
		fn, err := e.StartRIE(ctx, bins["bootstrap"], env, run.emf)
		if err != nil {
			return nil, err
		}
		run.sw.fn.Store(&localaws.RIE{URL: fn.URL})
		mctx, mstop := context.WithCancel(ctx)
		m := &mapping{sqs: run.Stack.SQS, url: run.Stack.QueueURL, arn: run.Stack.QueueARN, timeout: sc.FunctionTimeout, sw: run.sw}
		done := make(chan struct{})
		go func() { m.run(mctx, fn); close(done) }()
		return func() {
			mstop()
			<-done
			fn.Stop()
			r.Invocations, r.LambdaDeadlineHits = m.invocations.Load(), int(m.deadlineHits.Load())
			pauseResult(run.sw, r)
			run.sw.receives.record(r)
			r.Extra["requeued"], r.Extra["kept_last_receive"] = run.emf.requeued(), run.emf.kept()
		}, nil
	case PathSQSWorker:
		env["SOURCE"], env["SLUICE_HTTP_TIMEOUT"] = "sqs", "2s"
		w, err := e.StartWorker(bins["worker"], env, logf)
		if err != nil {
			return nil, err
		}
		run.Worker = w
		return func() {
			if err := w.Terminate(time.Minute); err != nil {
				r.Faults = append(r.Faults, "final stop: "+err.Error())
			}
		}, nil
	}
	return nil, fmt.Errorf("unknown path %q", sc.Path)
}

// mapping is the SQS event source mapping (ReportBatchItemFailures) in front
// of the function under the emulator; it counts the invocations that ran to
// the function's deadline.
type mapping struct {
	sqs                       *sqs.Client
	url, arn                  string
	timeout                   time.Duration
	invocations, deadlineHits atomic.Int64
	// sw turns the mapping off and on (the controller's pause).
	sw *standIn
}

func (m *mapping) run(ctx context.Context, fn *consumers.RIE) {
	for ctx.Err() == nil {
		if m.sw.off.Load() { // a disabled mapping receives nothing
			_ = sleep(ctx, 100*time.Millisecond)
			continue
		}
		msgs, ev, ok := consumers.ReceiveEvent(ctx, m.sqs, m.url, m.arn, m.timeout+5*time.Second)
		if !ok {
			continue
		}
		m.sw.count(len(msgs))
		for _, msg := range msgs {
			n, _ := strconv.Atoi(msg.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
			m.sw.receives.add(aws.ToString(msg.MessageId), n)
		}
		m.invocations.Add(1)
		start := time.Now()
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.timeout+10*time.Second)
		m.sw.invoking.Lock()
		resp, err := fn.Invoke(ictx, ev)
		m.sw.invoking.Unlock()
		cancel()
		if time.Since(start) >= m.timeout-100*time.Millisecond || (err != nil && strings.Contains(err.Error(), "timed out")) {
			m.deadlineHits.Add(1)
		}
		if err != nil {
			continue // the whole batch comes back after its visibility timeout
		}
		consumers.Settle(ctx, m.sqs, m.url, msgs, resp)
	}
}

// Build compiles the SQS consumer's bootstrap and the worker into e.WorkDir.
func Build(ctx context.Context, e consumers.Env) (map[string]string, error) {
	bins := map[string]string{}
	for name, pkg := range map[string]string{"bootstrap": "./functions/sqs-consumer", "worker": "./functions/worker"} {
		bin, err := e.Build(ctx, pkg, name)
		if err != nil {
			return nil, err
		}
		bins[name] = bin
	}
	return bins, nil
}

// startSQSProxy starts run's SQSProxy in front of the SQS server and points
// the consumers' SQS endpoint at it; it returns what stops it.
func startSQSProxy(e consumers.Env, run *Run, env map[string]string) (func(), error) {
	target := e.SQSEndpoint
	if target == "" {
		target = e.AWSEndpoint
	}
	p, err := NewSQSProxy(target)
	if err != nil {
		return nil, err
	}
	srv := httptest.NewServer(p)
	run.SQSProxy = p
	env["AWS_ENDPOINT_URL_SQS"] = srv.URL
	return srv.Close, nil
}

// startSilent starts run's SilentProxy in front of the destination (the
// HTTP service at destURL, or the scenario's MariaDB), DynamoDB and SQS,
// and points the consumers at them; it returns what stops them. The
// MySQL DSN through the proxy has no read or write timeout, as a DSN from
// an RDS secret has none: what bounds a silent call is the consumer's.
func startSilent(e consumers.Env, run *Run, env map[string]string, destURL string) (func(), error) {
	run.Silent = map[string]*SilentProxy{}
	stop := func() {
		for _, p := range run.Silent {
			p.Close()
		}
	}
	targets := map[string]string{"dynamodb": e.AWSEndpoint, "sqs": e.SQSEndpoint, "http": destURL}
	if run.DB != nil {
		delete(targets, "http")
		targets["mysql"] = fmt.Sprintf("tcp://127.0.0.1:%d", run.DB.Port)
	}
	for name, target := range targets {
		u, err := url.Parse(target)
		if err != nil {
			return stop, err
		}
		p, err := StartSilentProxy(u.Host)
		if err != nil {
			return stop, err
		}
		run.Silent[name] = p
	}
	if p := run.Silent["mysql"]; p != nil {
		env["SLUICE_MYSQL_DSN"] = "chaos:chaos@tcp(" + p.Addr() + ")/chaos"
	} else {
		env["SLUICE_HTTP_ENDPOINTS"] = "http://" + run.Silent["http"].Addr()
	}
	env["AWS_ENDPOINT_URL"] = "http://" + run.Silent["dynamodb"].Addr()
	env["AWS_ENDPOINT_URL_SQS"] = "http://" + run.Silent["sqs"].Addr()
	return stop, nil
}
