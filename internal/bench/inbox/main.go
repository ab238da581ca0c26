// Command inbox is `make bench-inbox`: the cost of the MySQL sink's inbox
// as it grows. On a private MariaDB (its own port, data directory and a
// 2 GB buffer pool; started and stopped by the run) it fills
// sluice_inbox with rows as consumers write them (a 36-character random
// message id, the body's SHA-256, the loop, stored_at one millisecond
// apart: 1,000 msg/s), and at each size (--sizes, default 1 M, 3 M,
// 10 M) measures the row's size on disk (data and index, after ANALYZE),
// the prune's DELETE of one chunk of 500 old rows (the Pruner's statement
// and session settings: median and p99 over --chunks chunks), a prune
// that finds nothing old, and a Store of 10 messages into the inbox
// (median of --stores batches). Commits are durable
// (innodb_flush_log_at_trx_commit=1) while it measures. The last line is
// one JSON object.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
)

// Size is the figures at one inbox size.
type Size struct {
	Rows           int64   `json:"rows"`
	FillSeconds    float64 `json:"fill_seconds"`
	DataBytesRow   float64 `json:"data_bytes_per_row"`
	IndexBytesRow  float64 `json:"index_bytes_per_row"`
	TotalMB        float64 `json:"total_mb"`
	PruneChunkMS   float64 `json:"prune_chunk_ms_median"`
	PruneChunkP99  float64 `json:"prune_chunk_ms_p99"`
	PruneChunks    int     `json:"prune_chunks"`
	PruneNothingMS float64 `json:"prune_nothing_old_ms"`
	StoreBatchMS   float64 `json:"store_10_ms_median"`
}

// Result is the run's JSON line.
type Result struct {
	Sizes   []Size   `json:"sizes"`
	Chunk   int      `json:"chunk_rows"`
	Seconds float64  `json:"seconds"`
	Errors  []string `json:"errors,omitempty"`
}

func main() {
	sizes := flag.String("sizes", "1000000,3000000,10000000", "inbox sizes to measure at, rows, increasing")
	chunks := flag.Int("chunks", 200, "prune chunks timed at each size")
	stores := flag.Int("stores", 50, "Store batches of 10 timed at each size")
	timeout := flag.Duration("timeout", 50*time.Minute, "give up after this long")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	var targets []int64
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil || n <= 0 || (len(targets) > 0 && n <= targets[len(targets)-1]) {
			fmt.Fprintf(os.Stderr, "--sizes=%q: want increasing positive row counts\n", *sizes)
			os.Exit(2)
		}
		targets = append(targets, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	start := time.Now()
	res := run(ctx, targets, *chunks, *stores, log)
	res.Seconds = time.Since(start).Seconds()
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
	if len(res.Errors) > 0 {
		os.Exit(1)
	}
}
