package loop

import (
	"errors"
	"math"
)

// AttrEditVersion is the PARAMS attribute that orders edits: every
// conditional write (WriteParamsIf of the stores, `sluice params set`, the
// dashboard) stores the version it read plus one, on condition that the
// stored version is still the one it read, so that of two operators editing
// at once one is refused instead of silently overwritten. The controller
// ignores it. An edit made with `aws dynamodb update-item` takes part by
// adding `ADD edit_version :one`.
const AttrEditVersion = "edit_version"

// ErrParamsConflict is returned by a conditional PARAMS write when the item
// changed since it was read: nothing was written.
var ErrParamsConflict = errors.New("PARAMS changed since they were read (another edit was written first): nothing was written; read them again and retry")

// ParamsVersion returns the edit version of a PARAMS item's attributes, 0
// when it has none (never edited conditionally).
func ParamsVersion(attrs map[string]any) int64 {
	switch v := attrs[AttrEditVersion].(type) {
	case float64:
		if v >= 0 && v == math.Trunc(v) {
			return int64(v)
		}
	case int64:
		return v
	case int:
		return int64(v)
	}
	return 0
}
