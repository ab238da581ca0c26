package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"
	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/lambdaesm"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// The mysql-down-15m scenario on the SQS Lambda path: the controller's own
// tick (loop.Ticker) holds the stand-in mapping off through a 15-minute
// outage of MariaDB and probes the destination through the function,
// which it invokes with a probe event through the stand-in's Lambda API
// (lambdaesm over standInLambda), as it invokes a real function's ARN.

// outageFor is how long the held outage lasts: d at full size, 45 s in
// the short runs of `make test`.
func (s Size) outageFor(d time.Duration) time.Duration {
	if s.Scale >= 1 {
		return d
	}
	return 45 * time.Second
}

// tickFor is the controller's tick period: d at full size, 4 s in the
// short runs (the probes come 2, 6 and 14 ticks after the hold).
func (s Size) tickFor(d time.Duration) time.Duration {
	if s.Scale >= 1 {
		return d
	}
	return 4 * time.Second
}

// outageEnv is the function's backoffs in the held outage: the defaults
// (30 s after a failed store, 4 min with an open circuit) at full size, the
// same share of the short run's tick (2 s, 16 s at a 4 s tick); the
// baseline's open-circuit visibility is the retry backoff's.
func (s Size) outageEnv() map[string]string {
	env := map[string]string{"SLUICE_RETRY_BACKOFF": "30s", "SLUICE_OPEN_BACKOFF": "4m"}
	if s.Scale < 1 {
		env["SLUICE_RETRY_BACKOFF"], env["SLUICE_OPEN_BACKOFF"] = "2s", "16s"
	}
	if s.Baseline {
		env["SLUICE_OPEN_BACKOFF"] = env["SLUICE_RETRY_BACKOFF"]
	}
	return env
}

// heldOutage is mysql-down on the SQS Lambda path with the controller
// ticking every tick (loop.Ticker on the stack's table, the consumers'
// leases, the stand-in mapping): once rows are stored, MariaDB stops for
// d, then starts; the fault ends when the controller has let the mapping
// receive again. The controller holds the mapping off through the outage
// (pkg/loop outage.go) and probes through the function; with baseline it
// probes as it did before, by turning the mapping on for a tick.
func heldOutage(rows int, d, tick time.Duration, baseline bool) func(context.Context, *Run) ([]string, error) {
	return func(ctx context.Context, r *Run) ([]string, error) {
		store := ddbloop.New(r.Stack.DDB, r.Stack.Table)
		params := map[string]any{"mode": "manual", "manual_rate": 100.0, "min_rate": 0.0, "max_rate": 1000.0,
			"setpoint": 70.0, "kp": 1.0, "metric_dimensions": map[string]any{"DBInstanceIdentifier": r.Stack.Loop},
			"tick_period": tick.String(), "rate_ttl": (6 * tick).String(), "esm_uuid": "chaos-" + r.Stack.Loop}
		if err := store.WriteParams(ctx, r.Stack.Loop, params); err != nil {
			return nil, err
		}
		var mappings loop.MappingScaler = lambdaesm.New(&standInLambda{sw: r.sw})
		if baseline {
			mappings = r.sw
		}
		ticker := &loop.Ticker{Store: store, Sources: metricsources.All(), Now: time.Now, Mappings: mappings}
		tctx, stop := context.WithCancel(ctx)
		held := &heldCount{}
		done := make(chan struct{})
		go func() { defer close(done); tickEvery(tctx, ticker, r.Stack.Loop, tick, held) }()
		faults, err := mysqlDown(rows, d)(ctx, r)
		if err == nil {
			err = until(ctx, func() bool { return !r.sw.off.Load() && held.last.Load() == 0 })
		}
		stop()
		<-done
		faults = append(faults, fmt.Sprintf("controller ticks: %d with the mapping held off, %d probes through the function (%d down), %d probes with the mapping on",
			held.ticks.Load(), held.direct.Load(), held.down.Load(), held.probes.Load()))
		r.Extra["held_ticks"], r.Extra["function_probes"], r.Extra["function_probes_down"], r.Extra["receiving_probes"] =
			held.ticks.Load(), held.direct.Load(), held.down.Load(), held.probes.Load()
		if err == nil {
			err = r.SetRate(ctx, 100)
		}
		return faults, err
	}
}

// heldCount counts the ticks that held the mapping off, the probes with
// the mapping on, and those through the function (down: that found the
// destination down); last is 1 while the last tick held it.
type heldCount struct{ ticks, probes, direct, down, last atomic.Int64 }

// tickEvery ticks every tick until ctx ends.
func tickEvery(ctx context.Context, ticker *loop.Ticker, id string, tick time.Duration, held *heldCount) {
	for ctx.Err() == nil {
		reports, _ := ticker.Tick(ctx)
		for _, rep := range reports {
			if rep.Loop != id || rep.Mapping == nil || rep.Outcome != loop.OutcomeApplied {
				continue
			}
			held.last.Store(0)
			if rep.Mapping.Probe != "" {
				held.direct.Add(1)
			}
			if rep.Mapping.Probe == loop.ProbeDown {
				held.down.Add(1)
			}
			switch {
			case rep.Mapping.Held && rep.Mapping.Probing:
				held.probes.Add(1)
				held.last.Store(1)
			case rep.Mapping.Held:
				held.ticks.Add(1)
				held.last.Store(1)
			}
		}
		_ = sleep(ctx, tick)
	}
}

// standInLambda is the stand-in mapping's Lambda API, as lambdaesm calls
// AWS's: GetEventSourceMapping (its function's ARN and state),
// UpdateEventSourceMapping (Enabled; the concurrency is not scaled here)
// and Invoke of the function under the emulator, one invocation at a time
// with the mapping's own (an emulator runs one at a time).
type standInLambda struct{ sw *standIn }

var (
	_ lambdaesm.API     = (*standInLambda)(nil)
	_ lambdaesm.Invoker = (*standInLambda)(nil)
)

// standInFunction is the stand-in function's ARN.
const standInFunction = "arn:aws:lambda:us-east-1:000000000000:function:chaos-sqs-consumer"

func (l *standInLambda) GetEventSourceMapping(_ context.Context, in *lambda.GetEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error) {
	state := "Enabled"
	if l.sw.off.Load() {
		state = "Disabled"
	}
	return &lambda.GetEventSourceMappingOutput{UUID: in.UUID, FunctionArn: aws.String(standInFunction), State: aws.String(state)}, nil
}

func (l *standInLambda) UpdateEventSourceMapping(_ context.Context, in *lambda.UpdateEventSourceMappingInput, _ ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error) {
	if in.Enabled != nil {
		l.sw.off.Store(!*in.Enabled)
	}
	return &lambda.UpdateEventSourceMappingOutput{UUID: in.UUID}, nil
}

func (l *standInLambda) Invoke(ctx context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	if aws.ToString(in.FunctionName) != standInFunction {
		return nil, &types.ResourceNotFoundException{Message: aws.String("Function not found: " + aws.ToString(in.FunctionName))}
	}
	fn := l.sw.function()
	if fn == nil {
		return nil, fmt.Errorf("invoke %s: the function is not running", standInFunction)
	}
	l.sw.invoking.Lock()
	defer l.sw.invoking.Unlock()
	out, err := fn.Invoke(ctx, in.Payload)
	var fe *localaws.FunctionError
	switch {
	case errors.As(err, &fe):
		return &lambda.InvokeOutput{StatusCode: 200, FunctionError: aws.String("Unhandled"), Payload: []byte(fe.Message)}, nil
	case err != nil:
		return nil, err
	}
	return &lambda.InvokeOutput{StatusCode: 200, Payload: out}, nil
}

// receiveCounts are the highest ApproximateReceiveCount the mapping saw
// of each message.
type receiveCounts struct {
	mu   sync.Mutex
	seen map[string]int
}

func (c *receiveCounts) add(id string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]int{}
	}
	c.seen[id] = max(c.seen[id], n)
}

// record puts the histogram of the receive counts (how many messages were
// received at most n times) and the highest in r's Extra.
func (c *receiveCounts) record(r *Result) {
	c.mu.Lock()
	defer c.mu.Unlock()
	hist, most := map[string]int{}, 0
	for _, n := range c.seen {
		hist[fmt.Sprint(n)]++
		most = max(most, n)
	}
	if r.Extra == nil {
		r.Extra = map[string]any{}
	}
	r.Extra["receives"], r.Extra["receives_max"] = hist, most
}
