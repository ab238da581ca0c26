// Package protocheck is the conformance check of the consumer protocol:
// it reads the rules from docs/protocol.md (the tables of keys and of each
// item's attributes, and the rules across attributes, by name) and checks
// items, or every protocol item of a table, against them. The Go store and
// the Python client are checked by its tests; a client in another language
// passes when CheckTable finds nothing on the items it wrote.
package protocheck

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Attr is one row of an item's table: the attribute, its type (S, N, M)
// and qualifier (time, count), and whether it is required.
type Attr struct {
	Name, Type, Qual string
	Required         bool
}

// Key is one row of the table of keys: an item kind and its key patterns.
type Key struct {
	Item   string
	PK, SK *regexp.Regexp
}

// Rules are docs/protocol.md's tables.
type Rules struct {
	Keys  []Key
	Items map[string]map[string]Attr
}

// Load parses the rules of the protocol document at path.
func Load(path string) (*Rules, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the protocol's rules: %w", err)
	}
	defer func() { _ = f.Close() }()
	r := &Rules{Items: map[string]map[string]Attr{}}
	var section string // "keys", an item kind, or "" outside a table
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "<!-- protocol:keys -->":
			section = "keys"
		case strings.HasPrefix(line, "<!-- protocol:item "):
			section = strings.TrimSuffix(strings.TrimPrefix(line, "<!-- protocol:item "), " -->")
			r.Items[section] = map[string]Attr{}
		case section != "" && strings.HasPrefix(line, "|"):
			if err := r.row(section, cells(line)); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		case section != "" && line != "":
			section = ""
		}
	}
	if len(r.Keys) == 0 || len(r.Items) == 0 {
		return nil, fmt.Errorf("%s: no table of keys or of items", path)
	}
	return r, nil
}

func cells(line string) []string {
	parts := strings.Split(strings.Trim(line, "|"), "|")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), "`")
	}
	return parts
}

// row adds one table row of section; header and rule rows are skipped.
func (r *Rules) row(section string, c []string) error {
	if len(c) < 3 || c[0] == "item" || c[0] == "attribute" || strings.HasPrefix(c[0], "---") {
		return nil
	}
	if section == "keys" {
		pk, err := pattern(c[1])
		if err != nil {
			return err
		}
		sk, err := pattern(c[2])
		if err != nil {
			return err
		}
		r.Keys = append(r.Keys, Key{Item: c[0], PK: pk, SK: sk})
		return nil
	}
	typ, qual, _ := strings.Cut(c[1], " ")
	r.Items[section][c[0]] = Attr{Name: c[0], Type: typ, Qual: qual, Required: c[2] == "yes"}
	return nil
}

// pattern turns a key pattern (`<loop>#LEASES`) into an anchored regexp
// with a named group per placeholder.
func pattern(p string) (*regexp.Regexp, error) {
	groups := map[string]string{"<loop>": `(?P<loop>.+)`, "<instance>": `(?P<instance>[^#]+)`, "<bucket>": `(?P<bucket>[0-9]{12})`}
	var b strings.Builder
	for rest := p; rest != ""; {
		i := strings.Index(rest, "<")
		if i < 0 {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		j := strings.Index(rest[i:], ">")
		if j < 0 {
			return nil, fmt.Errorf("key pattern %q: unclosed placeholder", p)
		}
		g, ok := groups[rest[i:i+j+1]]
		if !ok {
			return nil, fmt.Errorf("key pattern %q: unknown placeholder %s", p, rest[i:i+j+1])
		}
		b.WriteString(regexp.QuoteMeta(rest[:i]) + g)
		rest = rest[i+j+1:]
	}
	return regexp.Compile("^" + b.String() + "$")
}
