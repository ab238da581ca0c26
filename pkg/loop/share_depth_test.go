package loop_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// depthReader answers the members' queue depth queries (by QueueName) from
// depths and every other query from next.
type depthReader struct {
	next   metric.Reader
	depths map[string]float64
}

func (d *depthReader) ReadMetrics(ctx context.Context, qs []metric.Query, now time.Time) ([]metric.Sample, error) {
	out, err := d.next.ReadMetrics(ctx, qs, now)
	for i, q := range qs {
		if v, ok := d.depths[q.Dimensions[loop.DepthDimension]]; ok && q.Metric == loop.DepthMetric {
			out[i] = metric.Sample{Value: v, Time: now.Add(-time.Minute), Found: true}
		}
	}
	return out, err
}

// sharedQueues is each member's queue: what it holds and its producers'
// rate, messages/s.
type sharedQueues struct {
	queued, arrival map[string]float64
}

// take lets each member's consumer take a minute at its rate from its
// queue, reports its count, and returns what all of them took, messages/s.
func (q sharedQueues) take(r *sharedRig, reps map[string]loop.Report) float64 {
	var sum float64
	for id, queued := range q.queued {
		n := math.Min(reps[id].Rate*60, queued+q.arrival[id]*60)
		q.queued[id] = queued + q.arrival[id]*60 - n
		r.stored[id] += int64(n)
		sum += n / 60
	}
	return sum
}

// TestMembersWithDepthShareWhatTheirQueuesHold: a's queue holds 500
// messages/s and nothing queued, b a backlog of 30,000 on top of 200/s (it
// drains within a few ticks), c (a lower class) a backfill. Read from their
// consumers' counts alone, the first tick gives a and b the whole rate (c,
// with the backlog, nothing) and the tick after b ran dry still gives b
// what it took while it drained: the database receives less than the
// destination's rate. With each member's queue depth (depth_queue), a
// member claims what its queue holds for the next tick: a its probe at the
// first tick, c the rest, b its producers' rate once it ran dry, and the
// members take the destination's rate at every tick (a backlog claims what
// drains it over the tick, no headroom that would leave c short).
func TestMembersWithDepthShareWhatTheirQueuesHold(t *testing.T) {
	r := newSharedRig(t)
	q := sharedQueues{queued: map[string]float64{"a": 0, "b": 30_000, "c": 5e6}, arrival: map[string]float64{"a": 500, "b": 200, "c": 0}}
	r.depthMembers(t, q)
	var trace string
	drained := false
	for i := range 8 {
		reps := r.tickBy(time.Minute)
		a, b, c, R := reps["a"].Rate, reps["b"].Rate, reps["c"].Rate, reps["db"].Rate
		trace += fmt.Sprintf("\ntick %d: rate %.0f: a %.0f (queued %.0f), b %.0f (%.0f), c %.0f", i, R, a, q.queued["a"], b, q.queued["b"], c)
		if i == 0 && (a > 0.1*R || c < 0.4*R) {
			t.Fatalf("first tick: a (an empty queue) %.0f, c (a backfill) %.0f of %.0f; want a its probe, c the rest:%s", a, c, R, trace)
		}
		if q.queued["b"] == 0 && !drained {
			drained = true
			if b > q.arrival["b"]*(1+loop.MemberHeadroom)*1.01 {
				t.Fatalf("b ran dry: %.0f; want its producers' %.0f plus headroom, not what it took while it drained:%s", b, q.arrival["b"], trace)
			}
		}
		if i == 0 {
			r.start = r.clock.now // the consumers start with the first tick
		}
		took := q.take(r, reps)
		for id := range q.queued {
			r.report(id, "i-1", r.stored[id], r.start)
		}
		trace += fmt.Sprintf(": took %.0f", took)
		if took > 1.02*R || took < 0.98*R {
			t.Fatalf("the members took %.0f of the destination's %.0f messages/s; want it all, no more:%s", took, R, trace)
		}
	}
	if !drained {
		t.Fatalf("b never ran dry:%s", trace)
	}
}

// TestMemberCountsAsOfTheTick: a's queue holds 500 messages/s, c (a lower
// class) a backfill; each consumer takes its rate second by second and
// refreshes its lease 2 s before each tick (a lease refreshed every few
// seconds is that old at a tick), while the queues' depth is read at the
// tick. A member's producers' rate is what its consumers took plus its
// depth's change, and the two must cover the same interval: counted from
// report to report, a's count misses the last 2 s of each tick at the rate
// it has now and holds 2 s of the rate before, so that at every tick after
// its share moved its producers' rate reads wrong, its claim with it, and
// the members take more or less than the destination's rate (on the shared
// demo 1,215 of 1,200 messages/s the tick after orders' backlog drained).
func TestMemberCountsAsOfTheTick(t *testing.T) {
	r := newSharedRig(t)
	q := sharedQueues{queued: map[string]float64{"a": 0, "b": 0, "c": 5e6}, arrival: map[string]float64{"a": 500, "b": 0, "c": 0}}
	r.depthMembers(t, q)
	var trace string
	for i := range 8 {
		reps := r.tickBy(time.Minute)
		R := reps["db"].Rate
		trace += fmt.Sprintf("\ntick %d: rate %.1f: a %.1f (queued %.0f), c %.1f", i, R, reps["a"].Rate, q.queued["a"], reps["c"].Rate)
		if i == 0 {
			r.start = r.clock.now // the consumers start with the first tick
		}
		tick, took := r.clock.now, 0.0
		for s := range 60 {
			for id := range q.queued {
				q.queued[id] += q.arrival[id]
				n := math.Min(reps[id].Rate, q.queued[id])
				q.queued[id] -= n
				r.stored[id] += int64(n)
				took += n / 60
			}
			if s == 57 { // the lease refreshed at 58 s
				r.clock.now = tick.Add(58 * time.Second)
				for id := range q.queued {
					r.report(id, "i-1", r.stored[id], r.start)
				}
				r.clock.now = tick
			}
		}
		trace += fmt.Sprintf(": took %.1f", took)
		if i >= 2 && math.Abs(took-R) > 0.005*R {
			t.Errorf("tick %d: the members took %.1f of the destination's %.1f messages/s; want it all, no more", i, took, R)
		}
	}
	if t.Failed() {
		t.Log(trace)
	}
}

// TestMemberCountsAtShortTicks: at a 5 s tick a's consumer takes 100
// messages/s and refreshes its lease every 2 s, so that its last report is 0
// or 1 s old at one tick and the other at the next. The processed rate
// carried to the tick must read the 100 it takes at every tick: the counts
// from report to report are already scaled to the tick's length, and
// carrying them to the tick must not count the reports' ages twice.
func TestMemberCountsAtShortTicks(t *testing.T) {
	r := newSharedRig(t)
	r.params("db", func(a map[string]any) {
		a["ff_gain"], a["ff_base"], a["tick_period"] = 0.05, 10.0, "5s"
		a["kp"], a["ki"], a["max_rate"], a["min_rate"] = 2.0, 0.001, 6000.0, 0.0
	})
	var stored int64
	var sec int
	for i := range 12 {
		reps := r.tickBy(5 * time.Second)
		if i >= 3 {
			if p := reps["a"].Processed; !reps["a"].ProcessedKnown || math.Abs(p-100) > 2 {
				t.Errorf("tick %d: a's processed rate %.1f (known %v); want the 100 messages/s it takes", i, p, reps["a"].ProcessedKnown)
			}
		}
		tick := r.clock.now
		for s := range 5 {
			stored += 100
			if sec++; sec%2 == 0 { // the lease refreshed after the second
				r.clock.now = tick.Add(time.Duration(s+1) * time.Second)
				r.report("a", "i-1", stored, r.start)
			}
		}
		r.clock.now = tick
	}
}

// depthMembers makes a, b and c members of db with weights 3:2:1 (c in a
// lower class), each naming its queue (depth_queue), whose depths q holds.
func (r *sharedRig) depthMembers(t *testing.T, q sharedQueues) {
	t.Helper()
	r.ticker.Metrics[cwmetric.Name] = &depthReader{next: r.metrics, depths: q.queued}
	for id, attrs := range map[string]map[string]any{
		"a": member("db", 3, nil), "b": member("db", 2, nil),
		"c": member("db", 1, func(a map[string]any) { a["priority"] = -1.0 }),
	} {
		attrs["depth_queue"] = id
		if err := r.store.WriteParams(context.Background(), id, attrs); err != nil {
			t.Fatal(err)
		}
	}
}
