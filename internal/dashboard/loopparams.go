package dashboard

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"
	"github.com/sluice-dev/sluice/internal/paramsaudit"

	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// LoopStore is the part of the loop's stores (pkg/adapter/ddbstore,
// pkg/adapter/memstore) that the dashboard uses for parameters: the raw
// PARAMS attributes and the controller's PARAMS_STATUS verdict.
type LoopStore interface {
	ReadParams(ctx context.Context, loopID string) (map[string]any, error)
	WriteParams(ctx context.Context, loopID string, attrs map[string]any) error
	WriteParamsIf(ctx context.Context, loopID string, attrs map[string]any, read int64) error
	ReadStatus(ctx context.Context, loopID string) (loop.ParamsStatus, error)
}

// Attributes the dashboard stamps on the PARAMS items it writes; the
// controller ignores them.
const (
	AttrUpdatedAt = "updated_at"
	AttrUpdatedBy = "updated_by"
)

var (
	_ ParamsReader            = (*LoopParams)(nil)
	_ ParamsWriter            = (*LoopParams)(nil)
	_ ConditionalParamsWriter = (*LoopParams)(nil)
	_ Validator               = (*LoopParams)(nil)
)

// LoopParams reads and writes PARAMS items through a LoopStore and validates
// them with loop.DecodeParams: the very code the controller's tick runs.
type LoopParams struct {
	store LoopStore
	now   func() time.Time
}

// NewLoopParams returns the dashboard's parameter port over store; now
// stamps updated_at.
func NewLoopParams(store LoopStore, now func() time.Time) *LoopParams {
	return &LoopParams{store: store, now: now}
}

// Params returns the PARAMS item as stored, and the controller's refusal
// when PARAMS_STATUS refused this very item (same fingerprint): an edit made
// with `aws dynamodb update-item` that the controller refused shows its
// reason until it is fixed.
func (l *LoopParams) Params(ctx context.Context, loopID string) (ParamsStatus, error) {
	attrs, err := l.store.ReadParams(ctx, loopID)
	if errors.Is(err, protocol.ErrNotFound) {
		return ParamsStatus{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	if err != nil {
		return ParamsStatus{}, err
	}
	var st ParamsStatus
	if v, ok := attrs[AttrUpdatedAt].(string); ok {
		st.UpdatedAt, _ = time.Parse(time.RFC3339Nano, v)
	}
	st.UpdatedBy, _ = attrs[AttrUpdatedBy].(string)
	st.Changes, _ = attrs[paramsaudit.AttrChanges].(string)
	status, err := l.store.ReadStatus(ctx, loopID)
	switch {
	case errors.Is(err, protocol.ErrNotFound):
	case err != nil:
		return ParamsStatus{}, err
	case status.Status == loop.StatusRefused && status.Fingerprint == loop.Fingerprint(attrs):
		st.Refusal = status.Reason
		if status.InForce != "" {
			st.Refusal += " (" + status.InForce + ")"
		}
	}
	st.Version = loop.ParamsVersion(attrs)
	st.Params = maps.Clone(attrs)
	delete(st.Params, AttrUpdatedAt)
	delete(st.Params, AttrUpdatedBy)
	delete(st.Params, paramsaudit.AttrChanges)
	delete(st.Params, loop.AttrEditVersion)
	return st, nil
}

// SetParams replaces the PARAMS item with p, stamped with updated_at and
// updated_by: p's own (the Server's user) or else "dashboard".
func (l *LoopParams) SetParams(ctx context.Context, loopID string, p Params) error {
	return l.store.WriteParams(ctx, loopID, l.stamp(p))
}

// stamp is p with updated_at now and updated_by, "dashboard" unless p
// names who.
func (l *LoopParams) stamp(p Params) map[string]any {
	attrs := maps.Clone(map[string]any(p))
	attrs[AttrUpdatedAt] = l.now().UTC().Format(time.RFC3339Nano)
	if by, _ := attrs[AttrUpdatedBy].(string); by == "" {
		attrs[AttrUpdatedBy] = "dashboard"
	}
	return attrs
}

// SetParamsIf is SetParams on condition that the item's edit version is
// still version; a changed item is an error wrapping ErrConflict.
func (l *LoopParams) SetParamsIf(ctx context.Context, loopID string, p Params, version int64) error {
	err := l.store.WriteParamsIf(ctx, loopID, l.stamp(p), version)
	if errors.Is(err, loop.ErrParamsConflict) {
		return fmt.Errorf("%w (%w)", ErrConflict, err)
	}
	return err
}

// Validate decodes p as the controller does; a refusal lists every field
// with its reason.
func (l *LoopParams) Validate(loopID string, p Params) error {
	_, err := loop.DecodeParams(loopID, p, metricsources.All())
	return err
}

// Field describes one PARAMS attribute for the form, as pkg/loop declares
// it.
type Field struct {
	Name string `json:"name"`
	// Kind is number, string, bool or map: how the form encodes the value.
	Kind     string `json:"kind"`
	Required bool   `json:"required,omitempty"`
	// PerSignal is true for an attribute each signal of `signals` has too.
	PerSignal bool `json:"per_signal,omitempty"`
	// Unit, Default and Range are the declared unit, default and range.
	Unit    string `json:"unit,omitempty"`
	Default string `json:"default,omitempty"`
	Range   string `json:"range,omitempty"`
	// Doc says what the attribute means, with its unit and range.
	Doc string `json:"doc"`
}

// LoopFields returns the PARAMS attributes that loop.DecodeParams reads,
// for the form: every attribute appears, with its type and documentation.
func LoopFields() []Field {
	attrs := loop.ParamsAttributes(metricsources.All())
	out := make([]Field, 0, len(attrs))
	for _, a := range attrs {
		kind := map[string]string{"N": "number", "BOOL": "bool", "M": "map"}[a.Type]
		if kind == "" {
			kind = "string"
		}
		out = append(out, Field{Name: a.Name, Kind: kind, Required: a.Required, PerSignal: a.PerSignal,
			Unit: a.Unit, Default: a.Default, Range: a.Range, Doc: a.Help()})
	}
	return out
}
