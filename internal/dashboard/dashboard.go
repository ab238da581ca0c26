// Package dashboard serves Sluice's web dashboard: for each loop, live charts
// of setpoint, measured CPU, allowed and consumed rate, the P, I and
// feedforward terms and the queue depth, with saturated and stale periods
// shaded, and a form that edits the loop's PARAMS item after validating it
// with the controller's own code.
//
// The package declares the small interfaces it needs (HistoryReader,
// ParamsReader, ParamsWriter, Validator, LoopLister); adapters implement them
// for DynamoDB (pkg/adapter/ddbhistory and the loop's PARAMS store) and in
// memory (this package's Memory* types, used by the demo and tests). Its
// HTML, CSS and JavaScript are embedded: no CDN, no build step.
package dashboard

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-dev/sluice/pkg/history"
)

// Point is one controller tick of one loop, as the dashboard charts it
// (history.Point: the adapters store and read that type).
type Point = history.Point

// SignalPoint is one signal of a loop with several signals in a Point.
type SignalPoint = history.SignalPoint

// HistoryReader reads a loop's history, oldest point first.
type HistoryReader interface {
	// Last returns the newest n points of the loop.
	Last(ctx context.Context, loopID string, n int) ([]Point, error)
	// Since returns the points after t (exclusive), at most n of them, the
	// oldest first.
	Since(ctx context.Context, loopID string, t time.Time, n int) ([]Point, error)
}

// Params is a loop's PARAMS item as the dashboard edits it: attribute name to
// value, where values are numbers (float64), strings, booleans or maps, as a
// DynamoDB item converted to Go (the form loop.DecodeParams reads). The
// field names are those of the controller's parameters; the dashboard does
// not interpret them beyond "mode", and leaves validation to a Validator.
type Params map[string]any

// ParamsStatus is what the dashboard shows of a loop's PARAMS item.
type ParamsStatus struct {
	// Params are the parameters in force (the last valid ones).
	Params Params `json:"params"`
	// Refusal is the reason the last edit was refused, "" when the last edit
	// was accepted. An edit made outside the dashboard (aws dynamodb
	// update-item) is refused by the controller, which records the reason.
	Refusal string `json:"refusal,omitempty"`
	// UpdatedAt is when the parameters were last written; zero if unknown.
	// UpdatedBy is who wrote them and Changes what changed (paramsaudit),
	// "" when unknown.
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	UpdatedBy string    `json:"updated_by,omitempty"`
	Changes   string    `json:"updated_changes,omitempty"`
	// Version is the edit version of the item read (0: never edited
	// conditionally). A form sends it back with its edit, which is refused
	// as a conflict when the item has changed since.
	Version int64 `json:"version"`
}

// ParamsReader reads a loop's parameters and refusal status.
type ParamsReader interface {
	Params(ctx context.Context, loopID string) (ParamsStatus, error)
}

// ParamsWriter writes a loop's PARAMS item. The dashboard validates before it
// writes; the writer stores what it is given.
type ParamsWriter interface {
	SetParams(ctx context.Context, loopID string, p Params) error
}

// ConditionalParamsWriter writes a loop's PARAMS item on condition that its
// edit version is still version, the one read; otherwise it writes nothing
// and returns an error wrapping ErrConflict. The server uses it when the
// Writer implements it.
type ConditionalParamsWriter interface {
	SetParamsIf(ctx context.Context, loopID string, p Params, version int64) error
}

// ErrConflict reports an edit refused because the parameters changed since
// they were read.
var ErrConflict = errors.New("the parameters changed since they were read (another edit was saved first): nothing was written; reload them and edit again")

// Validator checks parameters with the same code the controller uses (for
// example loop.Params.Validate after decoding). A non-nil error is a refusal
// whose message a person can act on.
type Validator interface {
	Validate(loopID string, p Params) error
}

// ValidatorFunc adapts a function to Validator.
type ValidatorFunc func(loopID string, p Params) error

// Validate calls f(loopID, p).
func (f ValidatorFunc) Validate(loopID string, p Params) error { return f(loopID, p) }

// LoopLister lists the loops a table holds.
type LoopLister interface {
	Loops(ctx context.Context) ([]string, error)
}

// ErrNotFound is returned by readers when a loop or item does not exist.
var ErrNotFound = errors.New("not found")
