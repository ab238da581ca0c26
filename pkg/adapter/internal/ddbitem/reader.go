package ddbitem

import (
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// NewReader returns a Reader of item.
func NewReader(item map[string]types.AttributeValue) *Reader { return &Reader{item: item} }

// Reader reads the attributes of one item and collects what is wrong
// with them, so that a decoder reports every bad attribute at once. The
// items are decoded by hand rather than with attributevalue because a
// required attribute that is missing must be refused with its name (a RATE
// without its rate must not read as 0, which pauses every consumer), and
// optional ones have defaults other than zero (a missing measurement is NaN).
type Reader struct {
	item map[string]types.AttributeValue
	errs []error
}

// Add keeps err, when it is not nil, with the errors of the reads.
func (r *Reader) Add(err error) {
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

// Err joins the errors of the reads so far.
func (r *Reader) Err() error { return errors.Join(r.errs...) }

// S reads a required string.
func (r *Reader) S(name string) string { return read1(r, name, GetS) }

// OptS reads a string that may be missing ("").
func (r *Reader) OptS(name string) string { return read1(r, name, OptS) }

// N reads a required number.
func (r *Reader) N(name string) float64 { return read1(r, name, GetN) }

// OptN reads a number that may be missing (def).
func (r *Reader) OptN(name string, def float64) float64 {
	return read1(r, name, func(item map[string]types.AttributeValue, name string) (float64, error) {
		return OptNum(item, name, def)
	})
}

// Whole reads a required whole number exactly.
func (r *Reader) Whole(name string) int64 { return read1(r, name, GetInt) }

// TS reads a required RFC 3339 time.
func (r *Reader) TS(name string) time.Time { return read1(r, name, GetTime) }

// OptTS reads an RFC 3339 time that may be missing (zero).
func (r *Reader) OptTS(name string) time.Time { return read1(r, name, OptTime) }

// OptBool reads a boolean that may be missing (false).
func (r *Reader) OptBool(name string) bool { return read1(r, name, OptBool) }

// read1 reads the attribute name with get and keeps its error.
func read1[T any](r *Reader, name string, get func(map[string]types.AttributeValue, string) (T, error)) T {
	v, err := get(r.item, name)
	r.Add(err)
	return v
}

// OptJSON decodes the JSON string attribute name that may be missing into
// v (see getJSON), reporting whether it was there and decoded.
func (r *Reader) OptJSON(name string, v any) bool {
	if r.OptS(name) == "" {
		return false
	}
	err := GetJSON(r.item, name, v)
	r.Add(err)
	return err == nil
}
