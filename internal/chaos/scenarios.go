package chaos

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// Size sets how big the scenarios are.
type Size struct {
	// Lambda and Worker are the messages per run on each path.
	Lambda, Worker int
	// Scale multiplies the scenarios' durations (1 for `make chaos`).
	Scale float64
	// Baseline plays mysql-down-15m as before the probes through the
	// function: the controller probes by turning the mapping on for a
	// tick, and the function's open-circuit visibility is its retry
	// backoff's.
	Baseline bool
}

// Full is `make chaos`: 2,000 messages per run on the Lambda path, 10,000 on
// the worker paths (SQS and Kafka), the durations.
var Full = Size{Lambda: 2000, Worker: 10000, Scale: 1}

// Short is what `go test` runs: a few hundred messages, durations / 20.
var Short = Size{Lambda: 200, Worker: 300, Scale: 0.05}

func (s Size) d(d time.Duration) time.Duration { return time.Duration(float64(d) * s.Scale) }

// sleep waits d or until ctx ends.
var sleep = consume.WallClock{}.Sleep

// Scenarios returns the scenarios of the issue that run on SQS, sized by s.
func Scenarios(s Size) []Scenario {
	answers := httpAnswers(s)
	scenarios := []Scenario{
		{Name: "mysql-down-90s", Path: PathLambda, Messages: s.Lambda, Rate: 100, Sink: "mysql", Fault: mysqlDown(s.Lambda/3, max(s.d(90*time.Second), 15*time.Second))},
		{Name: "mysql-down-90s", Path: PathSQSWorker, Messages: s.Worker, Rate: 100, Sink: "mysql", Fault: mysqlDown(s.Worker/3, max(s.d(90*time.Second), 15*time.Second))},
		{Name: "http-answers", Path: PathLambda, Messages: s.Lambda, Rate: 100, Schedule: answers},
		{Name: "http-answers", Path: PathSQSWorker, Messages: s.Worker, Rate: 100, Schedule: answers},
		{Name: "rate-zero-5m", Path: PathLambda, Messages: s.Lambda, Rate: 100, Fault: pause(s.d(5 * time.Minute))},
		// 45 minutes: the 30-minute pause and the messages before and after it.
		{Name: "rate-zero-30m", Path: PathLambda, Messages: s.Lambda, Rate: 100, Fault: operatorPauseFault(s.Lambda/3, s.pauseFor(30*time.Minute)), Limit: 45 * time.Minute},
		{Name: "rate-zero-30m", Path: PathSQSWorker, Messages: s.Worker, Rate: 100, Fault: operatorPauseFault(s.Worker/3, s.pauseFor(30*time.Minute)), Limit: 45 * time.Minute},
		{Name: "rate-trickle", Path: PathLambda, Messages: s.Lambda, Rate: 100, Fault: trickle(s.d(5 * time.Minute))},
		{Name: "slow-sink", Path: PathLambda, Messages: s.Lambda, Rate: 100, Fault: slow(2 * time.Second)},
		{Name: "sigterm-mid-batch", Path: PathSQSWorker, Messages: s.Worker, Rate: 100, Fault: sigterms(3)},
	}
	// The held outage: 15 minutes at a 1-minute tick, or in the short runs
	// 45 s at a 4 s tick with the function's backoffs scaled alike.
	scenarios = append(scenarios, Scenario{Name: "mysql-down-15m", Path: PathLambda, Messages: s.Lambda, Rate: 100, Sink: "mysql",
		Limit: 45 * time.Minute, Env: s.outageEnv(), Fault: heldOutage(s.Lambda/3, s.outageFor(15*time.Minute), s.tickFor(time.Minute), s.Baseline)})
	if s.Scale >= 1 { // full size only on the worker path
		scenarios = append(scenarios, Scenario{Name: "mysql-down-15m", Path: PathSQSWorker, Messages: s.Worker, Rate: 100, Sink: "mysql",
			Limit: 45 * time.Minute, Fault: mysqlDown(s.Worker/3, 15*time.Minute)})
	}
	return append(scenarios, faultScenarios(s)...)
}

// httpAnswers is the http-answers schedule: 503 for 60 s, 401 for 60 s,
// 302 for 30 s, 404 for 30 s, then 200.
func httpAnswers(s Size) []Phase {
	return []Phase{
		{Status: http.StatusServiceUnavailable, Lasts: s.d(60 * time.Second)}, {Status: http.StatusUnauthorized, Lasts: s.d(60 * time.Second)},
		{Status: http.StatusFound, Lasts: s.d(30 * time.Second)}, {Status: http.StatusNotFound, Lasts: s.d(30 * time.Second)},
	}
}

// pause sets the loop's rate to 0 (an operator's manual pause) for d, then
// back to 100.
func pause(d time.Duration) func(context.Context, *Run) ([]string, error) {
	return holdRate(0, d, "rate 0")
}

// trickle sets an aggregate rate of 0.1 msg/s for d, then 100.
func trickle(d time.Duration) func(context.Context, *Run) ([]string, error) {
	return holdRate(0.1, d, "rate 0.1 msg/s")
}

// holdRate sets the loop's rate to rate for d, then back to 100; what names
// the fault.
func holdRate(rate float64, d time.Duration, what string) func(context.Context, *Run) ([]string, error) {
	return func(ctx context.Context, r *Run) ([]string, error) {
		if err := r.SetRate(ctx, rate); err != nil {
			return nil, err
		}
		if err := sleep(ctx, d); err != nil {
			return nil, err
		}
		return []string{fmt.Sprintf("%s for %v", what, d)}, r.SetRate(ctx, 100)
	}
}

// slow makes every answer of the destination take d.
func slow(d time.Duration) func(context.Context, *Run) ([]string, error) {
	return func(_ context.Context, r *Run) ([]string, error) {
		r.Dest.SetDelay(d)
		return []string{fmt.Sprintf("every request takes %v", d)}, nil
	}
}

// sigterms stops the worker with SIGTERM n times while a request is in
// flight (the destination answers in 300 ms), restarting it each time.
func sigterms(n int) func(context.Context, *Run) ([]string, error) {
	return func(ctx context.Context, r *Run) ([]string, error) {
		r.Dest.SetDelay(300 * time.Millisecond)
		var faults []string
		for i := range n {
			if err := sleep(ctx, 2*time.Second); err != nil {
				return faults, err
			}
			select {
			case <-r.Dest.InFlight():
			case <-ctx.Done():
				return faults, ctx.Err()
			}
			if err := r.Worker.Terminate(90 * time.Second); err != nil {
				return faults, err
			}
			faults = append(faults, fmt.Sprintf("SIGTERM %d with a request in flight", i+1))
			if err := r.Worker.Restart(); err != nil {
				return faults, err
			}
		}
		r.Dest.SetDelay(0)
		return faults, nil
	}
}

// mysqlDown stops the scenario's MariaDB once rows are stored, for d, under
// load, then starts it again.
func mysqlDown(rows int, d time.Duration) func(context.Context, *Run) ([]string, error) {
	return func(ctx context.Context, r *Run) ([]string, error) {
		for r.DB.Rows(ctx) < rows {
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return nil, err
			}
		}
		at := r.DB.Rows(ctx)
		r.DB.Stop()
		if err := sleep(ctx, d); err != nil {
			return nil, err
		}
		if err := r.DB.Start(ctx); err != nil {
			return nil, err
		}
		return []string{fmt.Sprintf("MariaDB stopped at %d rows for %v", at, d)}, nil
	}
}
