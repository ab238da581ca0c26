package main

import (
	"log/slog"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// memberAttrs are what a member of a destination was given: its
// destination, weight, class and share of the destination's rate.
func memberAttrs(r loop.Report) ([]slog.Attr, bool) {
	m := r.Member
	if m == nil {
		return nil, false
	}
	return []slog.Attr{slog.String("destination", m.Destination), slog.Float64("weight", m.Weight),
		slog.Int("priority", m.Priority), slog.Float64("destination_rate", m.Total), slog.Float64("share", m.Share)}, false
}
