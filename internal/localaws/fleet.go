package localaws

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/sluice-dev/sluice/internal/defaults"
)

// DefaultConcurrencyEvery is how often a Fleet reads the mapping's
// concurrency.
const DefaultConcurrencyEvery = 3 * time.Second

// Fleet is the SQS event source mapping's scaling: it runs at most
// MaximumConcurrency of its pollers at once (one poller per emulator, since
// an emulator runs one invocation at a time), and reads that limit every
// Every from Concurrency (the mapping's ScalingConfig.MaximumConcurrency on
// the local endpoint, for instance). A poller it stops finishes the batch it
// holds first: no in-flight batch is dropped. It sums the billed duration of
// every invocation (Billing).
type Fleet struct {
	Pollers []*Poller
	// Concurrency returns the most pollers that may run (0: no limit but
	// the pollers' number). nil runs them all. An error keeps the last
	// limit.
	Concurrency func(ctx context.Context) (int, error)
	// Enabled reports whether the mapping is enabled (MappingEnabled reads
	// the mapping's State). A disabled mapping receives nothing: every
	// poller stops after settling its batch, as AWS stops polling a
	// disabled mapping. nil is always enabled; an error keeps the last
	// answer.
	Enabled func(ctx context.Context) (bool, error)
	// Every is how often Concurrency is read (default
	// DefaultConcurrencyEvery).
	Every time.Duration
	// MemoryMB is the function's memory, for GB-seconds (default 128).
	MemoryMB int
	Log      *slog.Logger

	mu      sync.Mutex
	bill    Billing
	stops   []chan struct{} // per running poller, by index; nil when stopped
	dones   []chan struct{} // closed when poller i's goroutine returned
	limit   int             // pollers to run now
	conc    int             // the mapping's concurrency, last read
	enabled bool
	running sync.WaitGroup
}

// Billing sums the invocations of a Fleet.
type Billing struct {
	Invocations int64 `json:"invocations"`
	// Messages were handed to the function; Deleted were deleted after it
	// (stored or dead-lettered by it).
	Messages int64 `json:"messages"`
	Deleted  int64 `json:"deleted"`
	// Billed is the sum of the billed durations (each rounded up to 1 ms).
	Billed time.Duration `json:"billed_ns"`
	// MemoryMB is the function's memory.
	MemoryMB int `json:"memory_mb"`
}

// GBSeconds is the billed compute: billed seconds x memory MB / 1024.
func (b Billing) GBSeconds() float64 { return b.Billed.Seconds() * float64(b.MemoryMB) / 1024 }

// Sub returns b minus an earlier reading a.
func (b Billing) Sub(a Billing) Billing {
	return Billing{Invocations: b.Invocations - a.Invocations, Messages: b.Messages - a.Messages,
		Deleted: b.Deleted - a.Deleted, Billed: b.Billed - a.Billed, MemoryMB: b.MemoryMB}
}

// Billing returns the sums so far.
func (f *Fleet) Billing() Billing {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.bill
	b.MemoryMB = f.memory()
	return b
}

// Running returns how many pollers run now.
func (f *Fleet) Running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runningLocked()
}

func (f *Fleet) runningLocked() int {
	n := 0
	for _, s := range f.stops {
		if s != nil {
			n++
		}
	}
	return n
}

func (f *Fleet) memory() int {
	return defaults.Positive(f.MemoryMB, 128)
}

func (f *Fleet) log() *slog.Logger {
	if f.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return f.Log
}

// Run runs the pollers until ctx ends, then waits for each to finish its
// batch, logs the billing summary and returns it.
func (f *Fleet) Run(ctx context.Context) Billing {
	every := defaults.Positive(f.Every, DefaultConcurrencyEvery)
	f.mu.Lock()
	f.stops = make([]chan struct{}, len(f.Pollers))
	f.dones = make([]chan struct{}, len(f.Pollers))
	f.limit = len(f.Pollers)
	f.conc = len(f.Pollers)
	f.enabled = f.Enabled == nil
	f.mu.Unlock()
	for _, p := range f.Pollers {
		inner := p.OnBatch
		p.OnBatch = func(r BatchResult) {
			f.count(r)
			if inner != nil {
				inner(r)
			}
		}
	}
	for {
		f.scale(ctx)
		select {
		case <-ctx.Done():
			f.running.Wait()
			b := f.Billing()
			f.log().Info("esm billing summary", "invocations", b.Invocations, "messages", b.Messages, "deleted", b.Deleted,
				"billed_s", b.Billed.Seconds(), "memory_mb", b.MemoryMB, "gb_s", b.GBSeconds())
			return b
		case <-time.After(every):
		}
	}
}

func (f *Fleet) count(r BatchResult) {
	if r.Received == 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.bill.Invocations++
	f.bill.Messages += int64(r.Received)
	f.bill.Deleted += int64(r.Deleted)
	f.bill.Billed += r.Billed
}

// scale reads the limit and starts or stops pollers to meet it.
func (f *Fleet) scale(ctx context.Context) {
	limit := f.readLimit(ctx)
	if !f.readEnabled(ctx) {
		limit = 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if limit != f.limit {
		f.log().InfoContext(ctx, "mapping concurrency", "maximum_concurrency", limit, "enabled", f.enabled, "pollers", len(f.Pollers))
	}
	f.limit = limit
	for i := range f.stops {
		switch {
		case i < limit && f.stops[i] == nil && ctx.Err() == nil && f.idle(i):
			stop, done := make(chan struct{}), make(chan struct{})
			f.stops[i], f.dones[i] = stop, done
			f.running.Add(1)
			go func() {
				defer f.running.Done()
				defer close(done)
				f.Pollers[i].RunUntil(ctx, stop)
			}()
		case i >= limit && f.stops[i] != nil:
			close(f.stops[i])
			f.stops[i] = nil
		}
	}
}

// readEnabled reads whether the mapping is enabled; an error keeps the
// last answer.
func (f *Fleet) readEnabled(ctx context.Context) bool {
	f.mu.Lock()
	last := f.enabled
	f.mu.Unlock()
	if f.Enabled == nil {
		return true
	}
	on, err := f.Enabled(ctx)
	if err != nil {
		f.log().WarnContext(ctx, "read the mapping's state; keeping the last", "enabled", last, "err", err)
		return last
	}
	f.mu.Lock()
	f.enabled = on
	f.mu.Unlock()
	return on
}

// readLimit reads the mapping's concurrency; an error keeps the last
// limit.
func (f *Fleet) readLimit(ctx context.Context) int {
	limit := len(f.Pollers)
	if f.Concurrency != nil {
		n, err := f.Concurrency(ctx)
		switch {
		case err != nil:
			f.log().WarnContext(ctx, "read the mapping's concurrency; keeping the last", "err", err)
			f.mu.Lock()
			limit = f.conc
			f.mu.Unlock()
		case n > 0:
			limit = min(n, len(f.Pollers))
		}
	}
	f.mu.Lock()
	f.conc = limit
	f.mu.Unlock()
	return limit
}

// idle reports whether poller i's last run (if any) has finished its batch.
func (f *Fleet) idle(i int) bool {
	if f.dones[i] == nil {
		return true
	}
	select {
	case <-f.dones[i]:
		return true
	default:
		return false
	}
}

// ConcurrencyReader reads a mapping's MaximumConcurrency
// (*lambdaesm.Scaler does).
type ConcurrencyReader interface {
	MaximumConcurrency(ctx context.Context, uuid string) (int, error)
}

// MappingConcurrency is a Fleet's Concurrency that reads the mapping uuid.
func MappingConcurrency(r ConcurrencyReader, uuid string) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) { return r.MaximumConcurrency(ctx, uuid) }
}

// MappingStateReader reads an event source mapping (a *lambda.Client).
type MappingStateReader interface {
	GetEventSourceMapping(ctx context.Context, in *lambda.GetEventSourceMappingInput, opts ...func(*lambda.Options)) (*lambda.GetEventSourceMappingOutput, error)
}

var _ MappingStateReader = (*lambda.Client)(nil)

// MappingEnabled is a Fleet's Enabled that reads the State of the mapping
// uuid: it polls when the State is Enabled, or Updating (an enabled
// mapping whose settings change keeps polling), and not when it is
// Disabled, Disabling, Creating, Enabling or Deleting.
func MappingEnabled(api MappingStateReader, uuid string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		out, err := api.GetEventSourceMapping(ctx, &lambda.GetEventSourceMappingInput{UUID: aws.String(uuid)})
		if err != nil {
			return false, fmt.Errorf("state of event source mapping %s: %w", uuid, err)
		}
		switch aws.ToString(out.State) {
		case "Enabled", "Updating":
			return true, nil
		default:
			return false, nil
		}
	}
}
