package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-dev/sluice/internal/defaults"
	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/localaws"
)

// PathKafkaLambda is the Kafka consumer Lambda's path: the real
// kafka-consumer bootstrap under the emulator behind the stand-in for
// Lambda's Kafka event source mapping (localaws.KafkaPoller), on the real
// broker; poison records go to the dead-letter topic.
const PathKafkaLambda = "kafka-lambda"

// kafkaFunctionTimeout is the kafka-consumer function's timeout.
const kafkaFunctionTimeout = 30 * time.Second

// KafkaLambda is what the kafka-lambda path runs.
type KafkaLambda struct {
	// Bootstrap is the built functions/kafka-consumer; RIE the emulator.
	Bootstrap, RIE string
	// Log receives the function's output (nil: discarded).
	Log *os.File
}

// KafkaLambdaScenarios are the scenarios the kafka-lambda path plays: the
// destination's outages and answers, with poison records. (A record the
// destination fails for ever holds its partition on this path, as on
// Lambda, until the mapping's on-failure destination takes the batch: the
// worker's kafka-stuck-record scenario does not apply.)
func KafkaLambdaScenarios(s Size, l *KafkaLambda) []KafkaScenario {
	var out []KafkaScenario
	all := KafkaScenarios(s)
	if s.Scale < 1 { // the function's timeout bounds a silent store here
		for _, sc := range kafkaFaultScenarios(s) {
			if sc.FullOnly {
				all = append(all, sc)
			}
		}
	}
	for _, sc := range all {
		// Not fk-order: a mapping retries a batch whole and commits a
		// partition in order, so a child whose parent is in a later
		// batch of another partition waits until the sink gives up on
		// it (OrderingWait) and is dead-lettered, healthy, whether the
		// partitions run one batch at a time or side by side (each
		// partition's head then waits for a parent behind another's).
		if sc.FK {
			continue
		}
		if sc.Stuck < 0 && sc.Collisions == 0 {
			sc.Lambda = l
			out = append(out, sc)
		}
	}
	return out
}

// consumeLambda runs the function under the emulator behind one mapping
// member reading every partition, until await is satisfied.
func (k *kafkaRun) consumeLambda(ctx context.Context, sc KafkaScenario, poison int, destURL string) (time.Duration, error) {
	emf := &emfCounter{}
	fn, url, err := k.startFunction(sc, destURL, emf)
	if err != nil {
		return 0, err
	}
	defer func() { fn.Process.Kill(); fn.Wait() }()
	k.dlq = dlqCounts{refused: emf.refused}
	cl, err := localaws.NewKafkaClient(k.brokers, k.topic+"-g", []string{k.topic})
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	p := &localaws.KafkaPoller{Client: cl, Invoker: countingInvoker{inner: &localaws.RIE{URL: url}, sw: k.sw, hits: &k.deadlineHits}, BatchSize: 100,
		RetryWait: 500 * time.Millisecond, Enabled: k.sw.enabled, Every: 100 * time.Millisecond}
	ctx, discarded := k.onFailure(ctx, sc, p)
	pctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.Run(pctx) }()
	defer func() { stop(); <-done }()
	adm := kadm.NewClient(k.cl)
	took, err := k.await(ctx, sc, poison, func() int64 {
		ends, err := adm.ListEndOffsets(ctx, k.topic+".dlt")
		if err != nil {
			return 0
		}
		var n int64
		ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
		return n
	})
	if n := discarded.Load(); n > 0 {
		k.extra["batches_discarded"] = n
		return took, context.Cause(ctx)
	}
	return took, err
}

// startFunction starts the emulator with the bootstrap, its sink the
// scenario's destination, its rate the scenario's (the safe rate: no RATE
// item is reachable).
func (k *kafkaRun) startFunction(sc KafkaScenario, destURL string, emf *emfCounter) (*exec.Cmd, string, error) {
	args, port, err := harness.RIEArgs(sc.Lambda.Bootstrap)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(sc.Lambda.RIE, args...)
	cmd.Env = append(os.Environ(), "AWS_ENDPOINT_URL=http://127.0.0.1:1", "AWS_MAX_ATTEMPTS=1", "AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test", "AWS_REGION=us-east-1", "AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(int(defaults.Positive(sc.FunctionTimeout, kafkaFunctionTimeout)/time.Second)),
		"SLUICE_SAFE_RATE="+strconv.FormatFloat(sc.Rate, 'f', -1, 64), "SLUICE_KAFKA_DLT="+k.topic+".dlt",
		"SLUICE_KAFKA_BROKERS="+strings.Join(k.brokers, ","), "SLUICE_SINK="+k.sinkName())
	switch {
	case k.db != nil && k.silent != nil:
		cmd.Env = append(cmd.Env, "SLUICE_MYSQL_DSN="+k.silentDSN())
	case k.db != nil:
		cmd.Env = append(cmd.Env, "SLUICE_MYSQL_DSN="+k.db.DSN())
	default:
		cmd.Env = append(cmd.Env, "SLUICE_HTTP_ENDPOINTS="+destURL)
	}
	if sc.FK {
		cmd.Env = append(cmd.Env, "SLUICE_MYSQL_STATEMENT="+fkStatement)
	}
	cmd.Stdout = emf
	if sc.Lambda.Log != nil {
		emf.next, cmd.Stderr = sc.Lambda.Log, sc.Lambda.Log
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("start %s: %w", sc.Lambda.RIE, err)
	}
	return cmd, "http://127.0.0.1:" + strconv.Itoa(port), nil
}

// onFailure gives the mapping an on-failure destination when sc asks for
// one: AWS then retries a failed batch at most
// localaws.DefaultDestinationRetries times and discards it (its records
// gone, only their offsets sent). A discarded batch ends the run (the
// returned context is cancelled); the count says how many were.
func (k *kafkaRun) onFailure(ctx context.Context, sc KafkaScenario, p *localaws.KafkaPoller) (context.Context, *atomic.Int64) {
	n := &atomic.Int64{}
	if !sc.OnFailure {
		return ctx, n
	}
	ctx, cancel := context.WithCancelCause(ctx)
	p.OnFailure = discardedBatches{}
	p.OnBatch = func(res localaws.KafkaBatchResult) {
		if res.Discarded {
			n.Add(1)
			cancel(fmt.Errorf("the mapping discarded a batch of %d records after %d invocations (%v): their records are gone", res.Records, res.Invocations, res.LastErr))
		}
	}
	return ctx, n
}

// discardedBatches is an on-failure destination that takes every failure
// (the run counts them through OnBatch).
type discardedBatches struct{}

func (discardedBatches) SendKafkaFailure(context.Context, localaws.KafkaFailure) error { return nil }

// emfCounter reads a function's output: it sums DeadLetterRefused,
// Requeued and KeptLastReceive over the EMF lines and passes everything
// on to next (nil: discarded).
type emfCounter struct {
	mu                  sync.Mutex
	partial             []byte
	total               int64
	requeues, keptTotal int64
	next                io.Writer
}

func (e *emfCounter) Write(b []byte) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.partial = append(e.partial, b...)
	for {
		i := bytes.IndexByte(e.partial, '\n')
		if i < 0 {
			break
		}
		// The emulator may print a prefix before the function's line.
		var line struct{ DeadLetterRefused, Requeued, KeptLastReceive int64 }
		if j := bytes.IndexByte(e.partial[:i], '{'); j >= 0 && json.Unmarshal(e.partial[j:i], &line) == nil {
			e.total += line.DeadLetterRefused
			e.requeues += line.Requeued
			e.keptTotal += line.KeptLastReceive
		}
		e.partial = e.partial[i+1:]
	}
	if e.next != nil {
		return e.next.Write(b)
	}
	return len(b), nil
}

// refused is the sum of DeadLetterRefused so far.
func (e *emfCounter) refused() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.total
}

// requeued is the sum of Requeued so far: messages the SQS Lambda sent
// again to their queue (their next receive their last, the destination
// failing).
func (e *emfCounter) requeued() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requeues
}

// kept is the sum of KeptLastReceive so far: such messages kept invisible
// for their last receive instead (12 h).
func (e *emfCounter) kept() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.keptTotal
}
