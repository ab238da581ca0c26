package main

import (
	"fmt"
	"math"
	"time"

	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/pkg/history"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// history is a loop's HIST points from t on, oldest first.
func (r *run) history(loopID string, t time.Time) ([]history.Point, error) {
	pts, err := r.hist.Since(r.Ctx, loopID, t, 10_000)
	if err != nil {
		return nil, fmt.Errorf("read the history of %s: %w", loopID, err)
	}
	return pts, nil
}

// consumed is the live loop's mean consumed rate since t (0 when unknown).
func (r *run) consumed(t time.Time) float64 {
	pts, err := r.history(r.live, t)
	if err != nil || len(pts) == 0 {
		return 0
	}
	return summarize("", pts).MeanConsumed
}

// phases records what the live loop's history shows from t on, split at
// its setpoint edits.
func (r *run) phases(t time.Time, name string) {
	pts, err := r.history(r.live, t)
	if err != nil {
		r.Fail("%v", err)
		return
	}
	for len(pts) > 0 {
		n := 1
		for n < len(pts) && pts[n].Setpoint == pts[0].Setpoint {
			n++
		}
		r.Res.Phases = append(r.Res.Phases, summarize(fmt.Sprintf("%s, setpoint %g", name, pts[0].Setpoint), pts[:n]))
		pts = pts[n:]
	}
}

// summarize is the mean and standard deviation of the measured CPU and
// the mean consumed rate over pts (stale ticks and unknown values left
// out).
func summarize(name string, pts []history.Point) phase {
	ph := phase{Name: name, Setpoint: pts[0].Setpoint, Ticks: len(pts)}
	var s, ss, cons float64
	n, nc := 0, 0
	for _, p := range pts {
		if !p.Stale && !math.IsNaN(p.Measured) {
			s, ss, n = s+p.Measured, ss+p.Measured*p.Measured, n+1
		}
		if !math.IsNaN(p.Consumed) {
			cons, nc = cons+p.Consumed, nc+1
		}
	}
	if n > 0 {
		ph.MeanCPU = e2ekit.Round(s/float64(n), 2)
		ph.SDCPU = e2ekit.Round(math.Sqrt(max(0, ss/float64(n)-(s/float64(n))*(s/float64(n)))), 2)
	}
	if nc > 0 {
		ph.MeanConsumed = e2ekit.Round(cons/float64(nc), 2)
	}
	return ph
}

// drainAndCount drains the queue in manual mode at max_rate, then checks
// that every message sent was stored exactly once.
func (r *run) drainAndCount() error {
	attrs, err := r.store.ReadParams(r.Ctx, r.live)
	if err != nil {
		return fmt.Errorf("read the live PARAMS: %w", err)
	}
	attrs[loop.AttrMode], attrs[loop.AttrManualRate] = string(loop.ModeManual), r.Cfg.MaxRate
	if err := r.store.WriteParams(r.Ctx, r.live, attrs); err != nil {
		return fmt.Errorf("manual mode for the drain: %w", err)
	}
	r.event("draining in manual mode at %g msg/s", r.Cfg.MaxRate)
	sent := int(r.sent.Load())
	deadline := time.Now().Add(3 * time.Minute)
	for {
		stored, dups, missing, err := r.count(sent)
		if err != nil {
			return err
		}
		r.Res.Sent, r.Res.Stored, r.Res.Duplicates, r.Res.Missing = sent, stored, dups, missing
		if missing == 0 && r.depth(r.Ctx) == 0 || time.Now().After(deadline) || r.Ctx.Err() != nil {
			break
		}
		r.Sleep(time.Second)
	}
	r.Res.Ticks, r.Res.TickErrors = int(r.Ticks.Load()), int(r.TickErrors.Load())
	r.Res.Batches, r.Res.BatchFails, r.Res.Datapoints = r.batches.Load(), r.failed.Load(), r.published.Load()
	if r.Res.Stored != r.Res.Sent || r.Res.Duplicates != 0 || r.Res.Missing != 0 {
		r.Fail("sent %d, stored %d, duplicates %d, missing %d", r.Res.Sent, r.Res.Stored, r.Res.Duplicates, r.Res.Missing)
	}
	if r.Res.Ticks < 10 {
		r.Fail("only %d controller ticks", r.Res.Ticks)
	}
	return nil
}

// count is what the messages table holds for seqs [0, sent): distinct
// seqs stored, applications beyond the first, seqs not stored.
func (r *run) count(sent int) (stored, duplicates, missing int, err error) {
	var rows int
	err = r.db.QueryRowContext(r.Ctx, `SELECT COUNT(*), COUNT(DISTINCT JSON_VALUE(body, '$.seq')) FROM messages
WHERE CAST(JSON_VALUE(body, '$.seq') AS UNSIGNED) < ?`, sent).Scan(&rows, &stored)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("count the stored messages: %w", err)
	}
	return stored, rows - stored, sent - stored, nil
}
