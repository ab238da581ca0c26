package ddbstore

import (
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// itemReader reads the attributes of one item and collects what is wrong
// with them, so that a decoder reports every bad attribute at once. The
// items are decoded by hand rather than with attributevalue because a
// required attribute that is missing must be refused with its name (a RATE
// without its rate must not read as 0, which pauses every consumer), and
// optional ones have defaults other than zero (a missing measurement is NaN).
type itemReader struct {
	item map[string]types.AttributeValue
	errs []error
}

func (r *itemReader) add(err error) {
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

// err joins the errors of the reads so far.
func (r *itemReader) err() error { return errors.Join(r.errs...) }

// s reads a required string.
func (r *itemReader) s(name string) string { return read1(r, name, getS) }

// optS reads a string that may be missing ("").
func (r *itemReader) optS(name string) string { return read1(r, name, optS) }

// n reads a required number.
func (r *itemReader) n(name string) float64 { return read1(r, name, getN) }

// optN reads a number that may be missing (def).
func (r *itemReader) optN(name string, def float64) float64 {
	return read1(r, name, func(item map[string]types.AttributeValue, name string) (float64, error) {
		return optNum(item, name, def)
	})
}

// whole reads a required whole number exactly.
func (r *itemReader) whole(name string) int64 { return read1(r, name, getInt) }

// ts reads a required RFC 3339 time.
func (r *itemReader) ts(name string) time.Time { return read1(r, name, getTime) }

// optTS reads an RFC 3339 time that may be missing (zero).
func (r *itemReader) optTS(name string) time.Time { return read1(r, name, optTime) }

// optBool reads a boolean that may be missing (false).
func (r *itemReader) optBool(name string) bool { return read1(r, name, optBool) }

// read1 reads the attribute name with get and keeps its error.
func read1[T any](r *itemReader, name string, get func(map[string]types.AttributeValue, string) (T, error)) T {
	v, err := get(r.item, name)
	r.add(err)
	return v
}

// optJSON decodes the JSON string attribute name that may be missing into
// v (see getJSON), reporting whether it was there and decoded.
func (r *itemReader) optJSON(name string, v any) bool {
	if r.optS(name) == "" {
		return false
	}
	err := getJSON(r.item, name, v)
	r.add(err)
	return err == nil
}
