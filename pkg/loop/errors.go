package loop

import "errors"

// ErrNotFound is returned by stores when an item (PARAMS, STATE or RATE) does
// not exist.
var ErrNotFound = errors.New("item not found")
