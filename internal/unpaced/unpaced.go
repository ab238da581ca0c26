// Package unpaced is the benchmarks' switch that runs a pkg/consume
// Consumer without pacing (no rate reads, no waiting), to measure what
// pacing costs against the same consumer code. It is not part of the
// public library: a user of pkg/consume cannot import it, and a production
// consumer never sets it. Like internal/defaults it imports only the
// standard library.
package unpaced

import "context"

type key struct{}

// Context returns ctx with pacing switched off for the batches run under it.
func Context(ctx context.Context) context.Context { return context.WithValue(ctx, key{}, true) }

// From reports whether ctx switches pacing off.
func From(ctx context.Context) bool {
	off, _ := ctx.Value(key{}).(bool)
	return off
}
