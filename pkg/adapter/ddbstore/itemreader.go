package ddbstore

import (
	"encoding/json"
	"errors"
	"fmt"
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
func (r *itemReader) s(name string) string {
	v, err := getS(r.item, name)
	r.add(err)
	return v
}

// optS reads a string that may be missing ("").
func (r *itemReader) optS(name string) string {
	v, err := optS(r.item, name)
	r.add(err)
	return v
}

// n reads a required number.
func (r *itemReader) n(name string) float64 {
	v, err := getN(r.item, name)
	r.add(err)
	return v
}

// optN reads a number that may be missing (def).
func (r *itemReader) optN(name string, def float64) float64 {
	v, err := optNum(r.item, name, def)
	r.add(err)
	return v
}

// whole reads a required whole number exactly.
func (r *itemReader) whole(name string) int64 {
	v, err := getInt(r.item, name)
	r.add(err)
	return v
}

// ts reads a required RFC 3339 time.
func (r *itemReader) ts(name string) time.Time {
	v, err := getTime(r.item, name)
	r.add(err)
	return v
}

// optTS reads an RFC 3339 time that may be missing (zero).
func (r *itemReader) optTS(name string) time.Time {
	v, err := optTime(r.item, name)
	r.add(err)
	return v
}

// optBool reads a boolean that may be missing (false).
func (r *itemReader) optBool(name string) bool {
	v, err := optBool(r.item, name)
	r.add(err)
	return v
}

// optJSON decodes a JSON string attribute that may be missing into v,
// reporting whether it was there and decoded.
func (r *itemReader) optJSON(name string, v any) bool {
	s := r.optS(name)
	if s == "" {
		return false
	}
	if err := json.Unmarshal([]byte(s), v); err != nil {
		r.add(fmt.Errorf("%s: %w", name, err))
		return false
	}
	return true
}
