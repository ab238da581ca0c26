package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

// The replica's lag is measured the way pt-heartbeat measures it: the
// primary writes its clock into a one-row table every Period, the row
// replicates like every other write, and the lag is the replica's clock
// minus the newest replicated value. Unlike Seconds_Behind_Master (whole
// seconds, 0 when the replica is idle, computed from the event being
// applied) it measures how old the replica's data is, to a Period. Both
// servers run on this machine, so they share one clock.
const heartbeatTable = `CREATE TABLE IF NOT EXISTS heartbeat (
  id TINYINT     NOT NULL PRIMARY KEY,
  ts DATETIME(6) NOT NULL
) ENGINE=InnoDB`

// Heartbeat writes the primary's clock into the heartbeat table every Period.
type Heartbeat struct {
	Primary *sql.DB
	Period  time.Duration
	// OnWrite, if set, sees when each write started and how long it took.
	OnWrite func(start time.Time, took time.Duration)
}

// Run writes until ctx ends.
func (h *Heartbeat) Run(ctx context.Context) {
	t := time.NewTicker(h.Period)
	defer t.Stop()
	for {
		start := time.Now()
		h.Primary.ExecContext(ctx, "REPLACE INTO heartbeat (id, ts) VALUES (1, NOW(6))")
		if h.OnWrite != nil {
			h.OnWrite(start, time.Since(start))
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// LagReading is one measurement of the replica.
type LagReading struct {
	// Lag is the replica's clock minus the newest replicated heartbeat, in
	// seconds.
	Lag float64
	// BehindMaster is SHOW SLAVE STATUS's Seconds_Behind_Master (-1 when
	// NULL: replication stopped).
	BehindMaster float64
}

// readLag measures the replica once.
func readLag(ctx context.Context, replica *sql.DB) (LagReading, error) {
	var r LagReading
	err := replica.QueryRowContext(ctx, "SELECT TIMESTAMPDIFF(MICROSECOND, ts, NOW(6)) / 1e6 FROM heartbeat WHERE id = 1").Scan(&r.Lag)
	if err != nil {
		return r, fmt.Errorf("read the heartbeat on the replica: %w", err)
	}
	r.BehindMaster = -1
	rows, err := replica.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return r, fmt.Errorf("show slave status: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return r, err
	}
	if rows.Next() {
		vals, err := mysqltest.ScanRow(rows)
		if err != nil {
			return r, err
		}
		for i, c := range cols {
			if c == "Seconds_Behind_Master" && vals[i].Valid {
				fmt.Sscan(vals[i].String, &r.BehindMaster)
			}
		}
	}
	return r, rows.Err()
}

// LagExporter serves the newest LagReading in Prometheus' text format:
//
//	sluice_replica_lag_seconds             the heartbeat lag
//	sluice_replica_seconds_behind_master   Seconds_Behind_Master, for comparison
//
// It measures every Period (a scrape never waits for the replica, whose
// process the CPU cap stops most of the time); a reading older than
// MaxAge is not served, so that Prometheus sees the series go stale rather
// than a frozen value.
type LagExporter struct {
	Read   func(context.Context) (LagReading, error)
	Period time.Duration
	MaxAge time.Duration
	Now    func() time.Time
	// OnReading, if set, sees every reading.
	OnReading func(time.Time, LagReading)

	mu   sync.Mutex
	last LagReading
	at   time.Time
}

// Run measures until ctx ends.
func (e *LagExporter) Run(ctx context.Context) {
	t := time.NewTicker(e.Period)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, e.MaxAge)
		r, err := e.Read(rctx)
		cancel()
		if err == nil {
			now := e.Now()
			e.mu.Lock()
			e.last, e.at = r, now
			e.mu.Unlock()
			if e.OnReading != nil {
				e.OnReading(now, r)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ServeHTTP writes the metrics.
func (e *LagExporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	r, at := e.last, e.at
	e.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintln(w, "# HELP sluice_replica_lag_seconds Replica clock minus the newest replicated heartbeat.")
	fmt.Fprintln(w, "# TYPE sluice_replica_lag_seconds gauge")
	fmt.Fprintln(w, "# HELP sluice_replica_seconds_behind_master SHOW SLAVE STATUS Seconds_Behind_Master.")
	fmt.Fprintln(w, "# TYPE sluice_replica_seconds_behind_master gauge")
	if at.IsZero() || e.Now().Sub(at) > e.MaxAge {
		return
	}
	fmt.Fprintf(w, "sluice_replica_lag_seconds %g\n", r.Lag)
	fmt.Fprintf(w, "sluice_replica_seconds_behind_master %g\n", r.BehindMaster)
}
