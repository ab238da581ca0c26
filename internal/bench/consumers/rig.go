package consumers

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink/mysqltest"
)

// rig is what every no-loss scenario stands on: a private MariaDB database,
// the AWS stack (table, queue, DLQ), the binary under test and its log file.
type rig struct {
	prefix  string
	bin     string
	dsn     string
	db      *sql.DB
	st      *Stack
	log     *os.File
	closers []func()
}

// newRig creates the database, the stack and the log file, named
// "sl-<name>-<nanoseconds>", and builds the binary bin of package pkg.
// Close releases them, also after an error.
func (e Env) newRig(ctx context.Context, name, pkg, bin string, o Options) (*rig, error) {
	r := &rig{prefix: fmt.Sprintf("sl-%s-%d", name, time.Now().UnixNano())}
	dsn, drop, err := mysqltest.Create(ctx, e.MySQLDSN)
	if err != nil {
		return r, err
	}
	r.dsn, r.closers = dsn, append(r.closers, drop)
	if r.db, err = sql.Open("mysql", dsn); err != nil {
		return r, err
	}
	r.closers = append(r.closers, func() { r.db.Close() })
	if r.st, err = e.NewStack(ctx, r.prefix, o.Rate, 3); err != nil {
		return r, err
	}
	r.closers = append(r.closers, r.st.Close)
	if r.log, err = os.Create(filepath.Join(e.WorkDir, r.prefix+".log")); err != nil {
		return r, err
	}
	r.closers = append(r.closers, func() { r.log.Close() })
	r.bin, err = e.Build(ctx, pkg, bin)
	return r, err
}

// Close releases what newRig made, last made first.
func (r *rig) Close() {
	for i := len(r.closers) - 1; i >= 0; i-- {
		r.closers[i]()
	}
}

// drained waits until the queue holds no message, visible or in flight.
func (r *rig) drained(ctx context.Context) error {
	err := waitUntil(ctx, func() (bool, error) {
		n, err := InFlight(ctx, r.st.SQS, r.st.QueueURL)
		return err == nil && n == 0, nil
	})
	if err != nil {
		return fmt.Errorf("queue not drained: %w", err)
	}
	return nil
}

// noLoss runs a no-loss scenario: on a fresh rig (named name, the binary
// bin built from pkg) and under o.Timeout, run sends the messages, injects
// the faults and returns the poison ones; noLoss then counts the table and
// the DLQ.
func (e Env) noLoss(ctx context.Context, o Options, path, name, pkg, bin string, run func(context.Context, *rig, Options, *NoLoss) (map[int]bool, error)) (NoLoss, error) {
	o = o.withDefaults()
	start := time.Now()
	res := NoLoss{Path: path, Sent: o.Messages}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	rg, err := e.newRig(ctx, name, pkg, bin, o)
	defer rg.Close()
	if err != nil {
		return res, err
	}
	poison, err := run(ctx, rg, o, &res)
	if err != nil {
		return res, err
	}
	return finish(ctx, e, rg.db, rg.st, o, poison, res, start)
}
