// Package defaults fills the unset numeric fields of a configuration.
//
// A configuration struct documents a default for each numeric field that
// is zero or negative ("default 10", "zero means 960"); its withDefaults
// function then sets each such field with one call:
//
//	c.BatchSize = defaults.Positive(c.BatchSize, 10)
//	c.MaxHold = defaults.Positive(c.MaxHold, 2*time.Second)
package defaults

// Number is the kinds of value Positive takes: the signed integers
// (time.Duration among them) and the floats.
type Number interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64 | ~float32 | ~float64
}

// Positive returns d when v <= 0 (unset, or negative), else v. A NaN is not
// <= 0, so it is returned as it is.
func Positive[T Number](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}
