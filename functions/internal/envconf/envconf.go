// Package envconf reads the functions' settings from the environment. It is
// the one reader of the controller, the worker and the consumer Lambdas, so
// that a variable is defaulted, parsed and refused the same way in every
// binary.
//
// It is a small helper of ours rather than a struct-tag library such as
// github.com/caarlos0/env: the binaries' errors name the variable, its value
// and what to write instead (SLUICE_SAFE_RATE="-1": want a rate >= 0 in
// messages/s), and which settings are required depends on others (SOURCE,
// SLUICE_SINK), which a tag library leaves to code beside it anyway.
//
// A Reader keeps the first error: read every setting in order, then check
// Err once.
package envconf

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Reader reads settings from an environment lookup (os.Getenv, or a map's
// in tests) and keeps the first error.
type Reader struct {
	getenv func(string) string
	err    error
}

// New returns a Reader on getenv.
func New(getenv func(string) string) *Reader { return &Reader{getenv: getenv} }

// Err returns the first error of the reads so far, or nil.
func (r *Reader) Err() error { return r.err }

// Fail records err unless an earlier error is recorded.
func (r *Reader) Fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// String returns the variable name, or def when it is empty.
func (r *Reader) String(name, def string) string {
	if v := r.getenv(name); v != "" {
		return v
	}
	return def
}

// On reports whether name is anything but "off" (empty is on).
func (r *Reader) On(name string) bool { return r.getenv(name) != "off" }

// List returns the comma-separated items of name, trimmed, without empty
// ones ("a, b," is [a b]).
func (r *Reader) List(name string) []string {
	var out []string
	for _, x := range strings.Split(r.getenv(name), ",") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

// Rate returns name as a rate >= 0 in messages/s, or def when it is empty.
func (r *Reader) Rate(name string, def float64) float64 {
	return read(r, name, def, "want a rate >= 0 in messages/s", func(v string) (float64, bool) {
		f, err := strconv.ParseFloat(v, 64)
		return f, err == nil && f >= 0
	})
}

// Duration returns name as a positive duration, or def when it is empty;
// example is a value to suggest in the error (such as 30s).
func (r *Reader) Duration(name string, def time.Duration, example string) time.Duration {
	return read(r, name, def, "want a positive duration such as "+example, func(v string) (time.Duration, bool) {
		d, err := time.ParseDuration(v)
		return d, err == nil && d > 0
	})
}

// Count returns name as a count >= 1, or def when it is empty.
func (r *Reader) Count(name string, def int) int {
	return read(r, name, def, "want a count >= 1", func(v string) (int, bool) {
		n, err := strconv.Atoi(v)
		return n, err == nil && n >= 1
	})
}

// Parse returns parse(value of name) and records its error.
func Parse[T any](r *Reader, name string, parse func(string) (T, error)) T {
	v, err := parse(r.getenv(name))
	if err != nil {
		r.Fail(err)
	}
	return v
}

// read parses the variable name with parse, or returns def when it is
// empty or an earlier read failed; a value parse refuses is an error
// "NAME="value": want".
func read[T any](r *Reader, name string, def T, want string, parse func(string) (T, bool)) T {
	v := r.getenv(name)
	if v == "" || r.err != nil {
		return def
	}
	x, ok := parse(v)
	if !ok {
		r.Fail(fmt.Errorf("%s=%q: %s", name, v, want))
		return def
	}
	return x
}
