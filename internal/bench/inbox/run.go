package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// base is the stored_at of row 0; row n is stored n milliseconds later.
var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// bench is the run's database and progress.
type bench struct {
	db     *sql.DB
	log    *slog.Logger
	filled int64 // rows inserted so far (seq 0..filled-1)
	pruned int64 // rows the measurements removed (the oldest)
}

// run starts the private server and measures at each size.
func run(ctx context.Context, targets []int64, chunks, stores int, log *slog.Logger) Result {
	res := Result{Chunk: mysqlsink.DefaultPruneChunk}
	fail := func(err error) Result { res.Errors = append(res.Errors, err.Error()); return res }
	srv, stop, err := mysqltest.StartTLS("--innodb-buffer-pool-size=2G", "--innodb-log-file-size=512M")
	if err != nil {
		return fail(err)
	}
	defer stop()
	if err := srv.Admin("CREATE DATABASE inbox_bench; CREATE USER 'b'@'%' IDENTIFIED BY 'b'; GRANT ALL ON *.* TO 'b'@'%'"); err != nil {
		return fail(err)
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName, cfg.ParseTime = "b", "b", "tcp", srv.Addr, "inbox_bench", true
	cfg.Params = map[string]string{"tx_isolation": "'READ-COMMITTED'"}
	db, err := mysqlsink.Open(cfg.FormatDSN(), mysqlsink.Conn{CA: srv.CA, MaxOpen: 4, MaxIdle: 4})
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	if err := mysqlsink.Migrate(ctx, db); err != nil {
		return fail(err)
	}
	b := &bench{db: db, log: log}
	for _, n := range targets {
		sz, err := b.measureAt(ctx, srv.Admin, n, chunks, stores)
		if err != nil {
			return fail(fmt.Errorf("at %d rows: %w", n, err))
		}
		log.Info("measured", "size", fmt.Sprintf("%+v", sz))
		res.Sizes = append(res.Sizes, sz)
	}
	return res
}

// measureAt fills the inbox to n rows and measures there.
func (b *bench) measureAt(ctx context.Context, admin mysqltest.Admin, n int64, chunks, stores int) (Size, error) {
	sz := Size{Rows: n}
	if err := admin("SET GLOBAL innodb_flush_log_at_trx_commit = 2"); err != nil { // filling only
		return sz, err
	}
	t0 := time.Now()
	if err := b.fill(ctx, n+b.pruned); err != nil {
		return sz, err
	}
	sz.FillSeconds = math.Round(time.Since(t0).Seconds())
	if err := admin("SET GLOBAL innodb_flush_log_at_trx_commit = 1"); err != nil {
		return sz, err
	}
	if err := b.footprint(ctx, n, &sz); err != nil {
		return sz, err
	}
	if err := b.prune(ctx, chunks, &sz); err != nil {
		return sz, err
	}
	ms, err := b.store(ctx, stores)
	sz.StoreBatchMS = ms
	return sz, err
}

// fill inserts rows up to seq total-1, 100,000 to a statement, with the
// Sequence engine: ids random (an MD5 as a UUID), stored_at 1 ms apart.
func (b *bench) fill(ctx context.Context, total int64) error {
	const step = 100000
	for b.filled < total {
		to := min(b.filled+step, total) - 1
		q := fmt.Sprintf(`INSERT INTO sluice_inbox (message_id, body_sha256, loop_id, stored_at)
SELECT CONCAT_WS('-', SUBSTR(h,1,8), SUBSTR(h,9,4), SUBSTR(h,13,4), SUBSTR(h,17,4), SUBSTR(h,21,12)),
       UNHEX(SHA2(seq, 256)), 'orders', TIMESTAMPADD(MICROSECOND, seq * 1000, '%s')
FROM (SELECT seq, MD5(seq) AS h FROM seq_%d_to_%d) s`, base.Format("2006-01-02 15:04:05"), b.filled, to)
		if _, err := b.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("fill rows %d to %d: %w", b.filled, to, err)
		}
		b.filled = to + 1
		if b.filled%1000000 == 0 {
			b.log.Info("filled", "rows", b.filled-b.pruned)
		}
	}
	return nil
}

// footprint reads the table's data and index size per row after ANALYZE.
func (b *bench) footprint(ctx context.Context, n int64, sz *Size) error {
	if _, err := b.db.ExecContext(ctx, "ANALYZE TABLE sluice_inbox"); err != nil {
		return err
	}
	var data, index float64
	err := b.db.QueryRowContext(ctx, "SELECT data_length, index_length FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = 'sluice_inbox'").Scan(&data, &index)
	sz.DataBytesRow, sz.IndexBytesRow = math.Round(data/float64(n)), math.Round(index/float64(n))
	sz.TotalMB = math.Round((data + index) / (1 << 20))
	return err
}

// prune times chunks DELETEs of the oldest 500 rows (the Pruner's
// statement, at read committed as the Pruner runs it), then one that
// finds nothing old.
func (b *bench) prune(ctx context.Context, chunks int, sz *Size) error {
	oldest := base.Add(time.Duration(b.pruned) * time.Millisecond)
	cutoff := oldest.Add(time.Duration(chunks*mysqlsink.DefaultPruneChunk) * time.Millisecond)
	sink, err := mysqlsink.Prepare(ctx, b.db, mysqlsink.Config{Retention: time.Hour, Now: func() time.Time { return cutoff.Add(time.Hour) }})
	if err != nil {
		return err
	}
	defer sink.Close()
	var took []float64
	for range chunks {
		t0 := time.Now()
		n, _, err := sink.Prune(ctx, 1)
		if err != nil {
			return err
		}
		took = append(took, float64(time.Since(t0).Microseconds())/1000)
		b.pruned += n
	}
	slices.Sort(took)
	sz.PruneChunks = len(took)
	sz.PruneChunkMS, sz.PruneChunkP99 = round2(took[len(took)/2]), round2(took[len(took)*99/100])
	idle, err := mysqlsink.Prepare(ctx, b.db, mysqlsink.Config{Retention: time.Hour, Now: func() time.Time { return oldest.Add(time.Hour - time.Second) }})
	if err != nil {
		return err
	}
	defer idle.Close()
	t0 := time.Now()
	if _, _, err := idle.Prune(ctx, 1); err != nil {
		return err
	}
	sz.PruneNothingMS = round2(float64(time.Since(t0).Microseconds()) / 1000)
	return nil
}

// store times Stores of 10 new messages (inbox rows and the default table).
func (b *bench) store(ctx context.Context, batches int) (float64, error) {
	sink, err := mysqlsink.Prepare(ctx, b.db, mysqlsink.Config{Loop: "orders"})
	if err != nil {
		return 0, err
	}
	defer sink.Close()
	var took []float64
	for i := range batches {
		msgs := make([]consume.Message, 10)
		for k := range msgs {
			msgs[k] = consume.Message{ID: fmt.Sprintf("store-%d-%d-%d", b.filled, i, k), Body: []byte(`{"order":1}`)}
		}
		t0 := time.Now()
		if _, err := sink.Store(ctx, msgs); err != nil {
			return 0, err
		}
		took = append(took, float64(time.Since(t0).Microseconds())/1000)
	}
	slices.Sort(took)
	return round2(took[len(took)/2]), nil
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
