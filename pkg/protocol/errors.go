package protocol

import "errors"

// ErrNotFound is returned (wrapped) by stores when an item (PARAMS, STATE,
// RATE) does not exist: a consumer then runs at its safe rate.
var ErrNotFound = errors.New("item not found")
