package main

import (
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
)

// idleBurst is the idle phase and the burst: the producers have stopped, the
// loop drains the queue at its own rate and then sits idle for a phase with
// the queue empty (the consumers report what they take: nothing), then a
// minute's worth of max_rate arrives at once. The highest 60-second mean CPU
// over the two phases after the burst must stay within setpoint + 10 points:
// without the consumers' report the allowed rate would have wound up toward
// max_rate during the idle phase.
func (r *run) idleBurst() {
	c := r.Cfg
	if !r.waitEmpty(3 * c.phase) {
		r.Fail("the queue did not empty before the idle phase")
		return
	}
	r.Sleep(c.phase)
	rate, err := ddbstore.New(r.ddb, r.table).ReadRate(r.Ctx, r.loopID)
	if err != nil {
		r.Fail("read RATE before the burst: %v", err)
		return
	}
	n := int(c.MaxRate * 60)
	r.Logf("idle for %v; allowed rate before the burst %.1f msg/s (max_rate %g); burst of %d messages", c.phase, rate.PerSecond, c.MaxRate, n)
	at := r.now()
	r.marks.burst = time.Now()
	for sent := 0; sent < n; sent += 10 {
		r.SendOrders(&r.orders, min(10, n-sent))
	}
	r.sleepUntil(at + 2*c.phase)
	peak := r.peakMeanCPU(at, r.now(), time.Minute)
	r.Res.RateBeforeBurst, r.Res.PeakMeanCPUAfterBurst, r.Res.Burst = e2ekit.Round(rate.PerSecond, 2), e2ekit.Round(peak, 2), n
	r.Logf("burst: highest 60-s mean CPU %.1f %% (setpoint %g)", peak, c.setpoint2)
	if math.IsNaN(peak) || peak > c.setpoint2+10 {
		r.Fail("highest 60-s mean CPU after the burst %.1f %%: above the setpoint %g + 10", peak, c.setpoint2)
	}
}

// waitEmpty waits until the queue holds no message, visible or in flight.
func (r *run) waitEmpty(within time.Duration) bool {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && r.Ctx.Err() == nil {
		out, err := r.sqs.GetQueueAttributes(r.Ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(r.queueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages,
				sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err == nil {
			var visible, inFlight int
			fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], &visible)
			fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)], &inFlight)
			if visible+inFlight == 0 {
				return true
			}
		}
		r.Sleep(time.Second)
	}
	return false
}

// peakMeanCPU is the highest mean CPU over a window of length w that starts
// at a recorded second in [from, to-w]; NaN when none fits.
func (r *run) peakMeanCPU(from, to, w time.Duration) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	peak := math.NaN()
	for i, p := range r.cpu {
		if p.t < from || p.t+w > to {
			continue
		}
		var s float64
		n := 0
		for _, q := range r.cpu[i:] {
			if q.t >= p.t+w {
				break
			}
			s += q.cpu
			n++
		}
		if n > 0 && (math.IsNaN(peak) || s/float64(n) > peak) {
			peak = s / float64(n)
		}
	}
	return peak
}
