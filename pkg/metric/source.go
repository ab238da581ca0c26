package metric

import (
	"fmt"
	"strings"
	"time"
)

// Kind is the type of a query attribute in a PARAMS item.
type Kind int

// Kinds of query attributes, and the Go type of their Values.
const (
	// KindString is a string (S): a string.
	KindString Kind = iota
	// KindDuration is a duration text such as "60s" (S): a time.Duration.
	KindDuration
	// KindStringMap is a map of strings (M): a map[string]string.
	KindStringMap
	// KindNumber is a finite number (N): a float64.
	KindNumber
)

// Attribute declares one PARAMS attribute of a source's query.
type Attribute struct {
	// Name is the attribute's name in PARAMS, metric_<something>.
	Name string
	// Kind is its type.
	Kind Kind
	// Default is its value when absent, of Kind's Go type; nil: none.
	Default any
	// DefaultDoc is the default as the docs show it (markdown).
	DefaultDoc string
	// Doc is its meaning (markdown: `code` in backquotes).
	Doc string
}

// Values are decoded query attributes by name, each of its Kind's Go type.
// An absent attribute without a default has no entry.
type Values map[string]any

// String returns the string attribute name ("" when absent).
func (v Values) String(name string) string { s, _ := v[name].(string); return s }

// Duration returns the duration attribute name (0 when absent).
func (v Values) Duration(name string) time.Duration { d, _ := v[name].(time.Duration); return d }

// StringMap returns the map attribute name (nil when absent).
func (v Values) StringMap(name string) map[string]string {
	m, _ := v[name].(map[string]string)
	return m
}

// Number returns the number attribute name (0 when absent).
func (v Values) Number(name string) float64 { f, _ := v[name].(float64); return f }

// FieldError says why one query attribute was refused.
type FieldError struct {
	// Attr is the attribute's name, or <attribute>.<part>.
	Attr string
	// Reason says what is wrong and what is expected.
	Reason string
}

func (e FieldError) Error() string { return e.Attr + ": " + e.Reason }

// Use is what a source's rules may depend on besides the query.
type Use struct {
	// Nodes is true for a loop with nodes, each with its own metric (the
	// loop's query is then their common part and may be incomplete).
	Nodes bool
}

// Source is one metric source's rules: the PARAMS attributes its query
// reads, how they make a Query and back, what a valid query is, a node's
// query and the key under which loops share one read.
type Source interface {
	// Name is the source's name, the value of metric_source.
	Name() string
	// Attributes declares the query attributes the source reads.
	Attributes() []Attribute
	// Decode makes a query from the decoded attributes (Source left
	// empty: the caller sets it).
	Decode(v Values, u Use) Query
	// Encode returns the attributes of q that a PARAMS item keeps; Decode
	// of them returns q.
	Encode(q Query, u Use) Values
	// Validate returns every reason q cannot be read; none for a valid one.
	Validate(q Query, u Use) []FieldError
	// Node returns the query of a node of a loop whose query is q, from
	// the node's metric text; an error says what text is wanted.
	Node(q Query, text string) (Query, error)
	// Key identifies q: queries with the same key read the same datapoint.
	Key(q Query) string
}

// Sources are the metric sources a program supports, the first one the
// default of a loop that names none.
type Sources []Source

// Lookup returns the source named name.
func (s Sources) Lookup(name string) (Source, bool) {
	for _, src := range s {
		if src.Name() == name {
			return src, true
		}
	}
	return nil, false
}

// Default returns the name of the first source, "" when there is none.
func (s Sources) Default() string {
	if len(s) == 0 {
		return ""
	}
	return s[0].Name()
}

// Names returns the sources' names as a sentence: "a", "a or b", "a, b or
// c"; quote wraps each name (markdown backquotes, or nothing).
func (s Sources) Names(quote string) string {
	names := make([]string, len(s))
	for i, src := range s {
		names[i] = quote + src.Name() + quote
	}
	switch len(names) {
	case 0:
		return "(no metric source is configured)"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Attributes returns every source's attributes, each name once (the first
// source declaring it wins), in source order.
func (s Sources) Attributes() []Attribute {
	var out []Attribute
	seen := map[string]bool{}
	for _, src := range s {
		for _, a := range src.Attributes() {
			if !seen[a.Name] {
				seen[a.Name] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// Attribute returns the declaration of the attribute name.
func (s Sources) Attribute(name string) (Attribute, bool) {
	for _, a := range s.Attributes() {
		if a.Name == name {
			return a, true
		}
	}
	return Attribute{}, false
}

// Key returns the key of q under its source's rules; a query of a source
// not in s keys by its fields.
func (s Sources) Key(q Query) string {
	if src, ok := s.Lookup(q.Source); ok {
		return q.Source + "|" + src.Key(q)
	}
	return fmt.Sprintf("%#v", q)
}
