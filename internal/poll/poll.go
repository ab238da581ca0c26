// Package poll waits for a condition in the harnesses (bench, chaos, e2e):
// it checks the condition, sleeps, and checks again until the condition
// holds, fails, or the context ends.
package poll

import (
	"context"
	"time"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// Until calls cond, then again every interval, until it reports done or an
// error, or ctx ends. It returns cond's error, or ctx's when ctx ended
// first.
func Until(ctx context.Context, every time.Duration, cond func() (done bool, err error)) error {
	for {
		done, err := cond()
		if err != nil || done {
			return err
		}
		if err := (consume.WallClock{}).Sleep(ctx, every); err != nil {
			return err
		}
	}
}
