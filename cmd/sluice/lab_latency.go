package main

import (
	"fmt"
	"io"
	"time"

	"github.com/sluice-dev/sluice/internal/dbload"
)

// latencyReport is the JSON of `sluice lab latency-mariadb`.
type latencyReport struct {
	Consumers int                 `json:"consumers"`
	Rate      float64             `json:"rate"`
	PhaseS    float64             `json:"phase_s"`
	ScanRows  int                 `json:"scan_rows"`
	DataRows  int                 `json:"data_rows"`
	Cores     float64             `json:"cores"`
	Rows      []dbload.LatencyRow `json:"rows"`
}

// runLabLatencyMariaDB is `sluice lab latency-mariadb`.
func runLabLatencyMariaDB(args []string, stdout, stderr io.Writer) int {
	const name = "sluice lab latency-mariadb"
	fs := newFlagSet(name, name+" [--rate MSG/S --consumers N --phase DUR] [--json]",
		"Measures the consumers' store latency per message against the database's CPU\n"+
			"under external loads of different shapes: --consumers goroutines store batches of\n"+
			"10 through mysqlsink at --rate messages/s in total on the workload of internal/dbload,\n"+
			"while another client's aggregate queries of the same size run beside them, for\n"+
			"--phase each: none, paced at 12 and 18 queries/s, unpaced on 1 to 8 connections,\n"+
			"none. What the inner loop of pkg/consume reads. Needs MariaDB (make up).")
	rf := addRealPlantFlags(fs)
	msgRate := fs.Float64("rate", 7, "the consumers' total rate, messages/s")
	consumers := fs.Int("consumers", 8, "consumers storing batches of 10")
	phase := fs.Duration("phase", 20*time.Second, "length of each load's phase")
	asJSON := fs.Bool("json", false, "print the rows as JSON")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	ctx, rp, stop, code := rf.start(name, "", stderr)
	defer stop()
	if rp == nil {
		return code
	}
	p := dbload.LatencyProbe{Plant: rp, MsgRate: *msgRate, Consumers: *consumers, Phase: *phase, Loads: dbload.DefaultLatencyLoads()}
	if !*asJSON {
		fmt.Fprintf(stdout, "consumers: %d x batches of 10 at %g msg/s; phase %v; %g cores\n", *consumers, *msgRate, *phase, rp.CPU.Cores)
		fmt.Fprintf(stdout, "%-24s %8s %8s %8s %9s %9s %9s %8s\n", "load", "cpu %", "host %", "q/s", "msg/s", "mean ms", "p50 ms", "p90 ms")
		p.Progress = func(r dbload.LatencyRow) {
			fmt.Fprintf(stdout, "%-24s %8.1f %8.1f %8.1f %9.1f %9.1f %9.1f %8.1f\n", r.Load, r.CPU, r.Host, r.QPS, r.MsgRate, r.MeanMs, r.P50Ms, r.P90Ms)
		}
	}
	rows, err := p.Run(ctx)
	if err != nil {
		return fail(stderr, name, err, 1)
	}
	if *asJSON {
		return printJSON(stdout, stderr, latencyReport{Consumers: *consumers, Rate: *msgRate, PhaseS: phase.Seconds(),
			ScanRows: rp.ScanRows, DataRows: rp.DataRows, Cores: rp.CPU.Cores, Rows: rows})
	}
	return 0
}
