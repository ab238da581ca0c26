package mysqlsink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/sluice-dev/sluice/pkg/consume"
)

// ErrStatement marks a configuration that cannot work: a statement that
// does not parse, names an unknown placeholder or that the database
// refuses to prepare, or an inbox table that is missing. A consumer stops at
// start on it instead of dead-lettering (or retrying) every message.
var ErrStatement = errors.New("mysql statement")

// placeholder kinds.
const (
	placeID   = "id"
	placeBody = "body"
	placeJSON = "json."
	placeAttr = "attr."
)

// param is one named placeholder of a statement, in the order of its "?".
type param struct {
	// name is the placeholder as written, without the colon: "id", "body",
	// "json.customer.id", "attr.trace-id".
	name string
	// path is the JSON path of a json. placeholder, split on dots.
	path []string
}

// statement is one SQL statement of the configured text, with its named
// placeholders replaced by "?" and listed in order.
type statement struct {
	sql    string
	params []param
}

// parseStatements splits text into statements on semicolons outside quotes
// and comments, and replaces each named placeholder (:id, :body,
// :json.PATH, :attr.NAME) by a "?" bound as a parameter. Quoted strings,
// quoted identifiers and comments are copied unchanged.
func parseStatements(text string) ([]statement, error) {
	var out []statement
	p := parser{src: text}
	for !p.done() {
		st, err := p.statement()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStatement, err)
		}
		if st.sql != "" {
			out = append(out, st)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no SQL statement in %q", ErrStatement, text)
	}
	return out, nil
}

// parser scans SQL text the way MySQL's lexer delimits strings and
// comments, enough to find statement ends and placeholders.
type parser struct {
	src string
	pos int
}

func (p *parser) done() bool { return p.pos >= len(p.src) }

// statement reads up to the next top-level semicolon. A statement made only
// of blanks and comments comes back with an empty sql.
func (p *parser) statement() (statement, error) {
	var b strings.Builder
	var st statement
	code := false // seen something other than blanks and comments
	for !p.done() {
		c := p.src[p.pos]
		switch {
		case c == ';':
			p.pos++
			return p.finish(st, b.String(), code), nil
		case c == '\'' || c == '"' || c == '`':
			b.WriteString(p.quoted(c))
			code = true
		case c == '#' || p.lineComment():
			b.WriteString(p.until("\n"))
		case strings.HasPrefix(p.src[p.pos:], "/*"):
			b.WriteString(p.until("*/"))
		case c == '?':
			return st, fmt.Errorf("positional placeholder ? at offset %d: use named placeholders (:id, :body, :json.PATH, :attr.NAME)", p.pos)
		case c == ':' && p.pos+1 < len(p.src) && isLetter(p.src[p.pos+1]):
			prm, err := p.placeholder()
			if err != nil {
				return st, err
			}
			st.params = append(st.params, prm)
			b.WriteByte('?')
			code = true
		default:
			b.WriteByte(c)
			p.pos++
			if !isSpace(c) {
				code = true
			}
		}
	}
	return p.finish(st, b.String(), code), nil
}

// lineComment reports whether a "-- " comment starts at pos: MySQL wants
// a blank or control character after the two dashes.
func (p *parser) lineComment() bool {
	rest := p.src[p.pos:]
	return strings.HasPrefix(rest, "--") && (len(rest) == 2 || rest[2] <= ' ')
}

func (p *parser) finish(st statement, sql string, code bool) statement {
	if !code {
		return statement{}
	}
	st.sql = strings.TrimSpace(sql)
	return st
}

// quoted reads a quoted string or identifier starting at pos: a doubled
// quote stays inside, and so does a backslash-escaped character in strings.
func (p *parser) quoted(q byte) string {
	start := p.pos
	p.pos++
	for !p.done() {
		c := p.src[p.pos]
		p.pos++
		switch {
		case c == '\\' && q != '`':
			p.pos++
		case c == q && p.pos < len(p.src) && p.src[p.pos] == q:
			p.pos++
		case c == q:
			return p.src[start:p.pos]
		}
	}
	p.pos = len(p.src)
	return p.src[start:]
}

// until reads through the next end (included), or to the end of the text.
func (p *parser) until(end string) string {
	start := p.pos
	if i := strings.Index(p.src[p.pos+1:], end); i >= 0 {
		p.pos += 1 + i + len(end)
	} else {
		p.pos = len(p.src)
	}
	return p.src[start:p.pos]
}

// placeholder reads :id, :body, :json.PATH or :attr.NAME at pos.
func (p *parser) placeholder() (param, error) {
	at := p.pos
	p.pos++ // the colon
	word := p.take(isWordByte)
	switch {
	case word == placeID || word == placeBody:
		return param{name: word}, nil
	case word+"." == placeJSON && p.peek('.'):
		var path []string
		for p.peek('.') && p.pos+1 < len(p.src) && isWordByte(p.src[p.pos+1]) {
			p.pos++
			path = append(path, p.take(isWordByte))
		}
		if len(path) == 0 {
			return param{}, fmt.Errorf("placeholder :json. at offset %d has no path (want :json.customer.id)", at)
		}
		return param{name: placeJSON + strings.Join(path, "."), path: path}, nil
	case word+"." == placeAttr && p.peek('.'):
		p.pos++
		name := strings.TrimRight(p.take(isAttrByte), ".")
		p.pos = at + 1 + len(placeAttr) + len(name)
		if name == "" {
			return param{}, fmt.Errorf("placeholder :attr. at offset %d has no name (want :attr.NAME)", at)
		}
		return param{name: placeAttr + name}, nil
	}
	return param{}, fmt.Errorf("unknown placeholder :%s at offset %d: want :id, :body, :json.PATH or :attr.NAME", word, at)
}

func (p *parser) peek(c byte) bool { return p.pos < len(p.src) && p.src[p.pos] == c }

func (p *parser) take(ok func(byte) bool) string {
	start := p.pos
	for p.pos < len(p.src) && ok(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

func isLetter(c byte) bool   { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isWordByte(c byte) bool { return isLetter(c) || c >= '0' && c <= '9' || c == '_' }
func isAttrByte(c byte) bool { return isWordByte(c) || c == '.' || c == '-' }
func isSpace(c byte) bool    { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// poisonError is a message that cannot be bound to the statement (a
// missing JSON path or attribute): poison, with the reason.
type poisonError struct{ reason string }

func (e *poisonError) Error() string { return e.reason }

// bind returns the values of st's parameters for m, in order. doc caches
// the decoded top level of m's body across the statements of one message.
func (st statement) bind(m consume.Message, doc *body) ([]any, error) {
	args := make([]any, len(st.params))
	for i, prm := range st.params {
		v, err := value(prm, m, doc)
		if err != nil {
			return nil, &poisonError{reason: fmt.Sprintf(":%s: %v", prm.name, err)}
		}
		args[i] = v
	}
	return args, nil
}

func value(prm param, m consume.Message, doc *body) (any, error) {
	switch {
	case prm.name == placeID:
		return m.ID, nil
	case prm.name == placeBody:
		return string(m.Body), nil
	case prm.path != nil:
		return doc.lookup(prm.path)
	default:
		name := strings.TrimPrefix(prm.name, placeAttr)
		v, ok := m.Attributes[name]
		if !ok {
			return nil, fmt.Errorf("the message has no attribute %q", name)
		}
		return v, nil
	}
}

// body is a message body decoded lazily for JSON lookups.
type body struct {
	raw  []byte
	top  map[string]json.RawMessage
	err  error
	read bool
}

// lookup returns the JSON value at path, typed as the JSON value is:
// string, integer (int64 or uint64), other numbers as their exact decimal
// text (MySQL converts it exactly to DECIMAL or DOUBLE), true/false, NULL
// for null, and objects and arrays as their JSON text.
func (b *body) lookup(path []string) (any, error) {
	if !b.read {
		b.read = true
		b.err = json.Unmarshal(b.raw, &b.top)
	}
	if b.err != nil {
		return nil, fmt.Errorf("the body is not a JSON object: %v", b.err)
	}
	raw, ok := b.top[path[0]]
	if !ok {
		return nil, fmt.Errorf("the body has no JSON path %s", path[0])
	}
	for i := 1; i < len(path); i++ {
		next, err := child(raw, path[i])
		if err != nil {
			return nil, fmt.Errorf("JSON path %s: %s", strings.Join(path[:i+1], "."), err)
		}
		raw = next
	}
	return scalar(raw)
}

// child returns the member key of an object, or the element at index key
// of an array.
func child(raw json.RawMessage, key string) (json.RawMessage, error) {
	switch t := bytes.TrimSpace(raw); {
	case len(t) > 0 && t[0] == '{':
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(t, &obj); err != nil {
			return nil, err
		}
		v, ok := obj[key]
		if !ok {
			return nil, errors.New("missing")
		}
		return v, nil
	case len(t) > 0 && t[0] == '[':
		var arr []json.RawMessage
		if err := json.Unmarshal(t, &arr); err != nil {
			return nil, err
		}
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || i >= len(arr) {
			return nil, fmt.Errorf("missing (an array of %d elements)", len(arr))
		}
		return arr[i], nil
	default:
		return nil, fmt.Errorf("missing (its parent is %s, not an object)", kind(t))
	}
}

func kind(t []byte) string {
	switch {
	case len(t) == 0:
		return "empty"
	case t[0] == '"':
		return "a string"
	case t[0] == 't' || t[0] == 'f':
		return "a boolean"
	case t[0] == 'n':
		return "null"
	}
	return "a number"
}

func scalar(raw json.RawMessage) (any, error) {
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) == 0:
		return nil, errors.New("no JSON value: want a string, number, boolean, null, object or array")
	case t[0] == '{' || t[0] == '[':
		var c bytes.Buffer
		if err := json.Compact(&c, t); err != nil {
			return nil, err
		}
		return c.String(), nil
	case t[0] == '"':
		var s string
		err := json.Unmarshal(t, &s)
		return s, err
	case string(t) == "null":
		return nil, nil
	case string(t) == "true" || string(t) == "false":
		return string(t) == "true", nil
	}
	n := string(t)
	if i, err := strconv.ParseInt(n, 10, 64); err == nil {
		return i, nil
	}
	if u, err := strconv.ParseUint(n, 10, 64); err == nil {
		return u, nil
	}
	return n, nil
}

// rows is a single-row INSERT or REPLACE ... VALUES (tuple) [ON DUPLICATE
// KEY UPDATE ...] whose placeholders are all inside its tuple: n messages
// can then go in one multi-row statement, VALUES (tuple), (tuple), ...,
// which MySQL applies row by row in order, as n executions would.
type rows struct {
	head, tuple, tail string
	params            int
}

// sql returns the statement for n rows.
func (r rows) sql(n int) string {
	var b strings.Builder
	b.Grow(len(r.head) + n*(len(r.tuple)+1) + len(r.tail))
	b.WriteString(r.head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(r.tuple)
	}
	b.WriteString(r.tail)
	return b.String()
}

// multiRow returns st as rows when it has that form.
func multiRow(st statement) (rows, bool) {
	p := parser{src: st.sql}
	var tupleStart, tupleEnd, depth, marks, inTuple int
	first := ""
	for !p.done() {
		c := p.src[p.pos]
		if p.skipQuotedOrComment() {
			continue
		}
		switch {
		case isWordByte(c):
			w := strings.ToUpper(p.take(isWordByte))
			if first == "" {
				first = w
			}
			if depth == 0 && (w == "VALUES" || w == "VALUE") && tupleStart == 0 {
				p.take(func(b byte) bool { return isSpace(b) })
				if !p.peek('(') {
					return rows{}, false
				}
				tupleStart = p.pos
			} else if depth == 0 && tupleEnd > 0 && w == "SELECT" {
				return rows{}, false
			}
			continue
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 && tupleStart > 0 && tupleEnd == 0 {
				tupleEnd = p.pos + 1
			}
		case c == ',' && depth == 0 && tupleEnd > 0 && strings.TrimSpace(p.src[tupleEnd:p.pos]) == "":
			return rows{}, false // a second tuple: already multi-row
		case c == '?':
			marks++
			if tupleStart > 0 && tupleEnd == 0 {
				inTuple++
			}
		}
		p.pos++
	}
	if (first != "INSERT" && first != "REPLACE") || tupleEnd == 0 || marks != len(st.params) || inTuple != marks || marks == 0 {
		return rows{}, false
	}
	return rows{head: st.sql[:tupleStart], tuple: st.sql[tupleStart:tupleEnd], tail: st.sql[tupleEnd:], params: marks}, true
}

// skipQuotedOrComment moves past a quoted string or identifier or a
// comment at p's position and reports whether there was one.
func (p *parser) skipQuotedOrComment() bool {
	c := p.src[p.pos]
	switch {
	case c == '\'' || c == '"' || c == '`':
		p.quoted(c)
		return true
	case c == '#' || p.lineComment() || strings.HasPrefix(p.src[p.pos:], "/*"):
		end := "\n"
		if c == '/' {
			end = "*/"
		}
		p.until(end)
		return true
	}
	return false
}
