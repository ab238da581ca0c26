package mysqlsink

import (
	"fmt"
	"strings"
)

// InboxOffGivesUp is what a sink without its inbox (Config.NoInbox) does
// not do, as it logs it at start.
const InboxOffGivesUp = "a redelivered message runs the statement again (harmless only because the statement is idempotent: " +
	"an upsert keyed on the message, such as its id); the same id with another body is no longer an id collision " +
	"dead-lettered with its reason, the upsert applies it; duplicates are not counted; nothing is written to the inbox " +
	"(no inbox rows, no pruning, no rights on it needed)"

// upsert reports whether st is idempotent by its form: REPLACE, or
// INSERT ... ON DUPLICATE KEY UPDATE (words outside quotes, comments and
// parentheses).
func upsert(st statement) bool {
	w := words(st.sql)
	if len(w) == 0 {
		return false
	}
	if w[0] == "REPLACE" {
		return true
	}
	if w[0] != "INSERT" {
		return false
	}
	return strings.Contains(" "+strings.Join(w, " ")+" ", " ON DUPLICATE KEY UPDATE ")
}

// words returns the upper-cased words of sql at parenthesis depth 0,
// outside quotes and comments.
func words(sql string) []string {
	p := parser{src: sql}
	var out []string
	depth := 0
	for !p.done() {
		c := p.src[p.pos]
		if p.skipQuotedOrComment() {
			continue
		}
		switch {
		case isWordByte(c):
			w := strings.ToUpper(p.take(isWordByte))
			if depth == 0 {
				out = append(out, w)
			}
			continue
		case c == '(':
			depth++
		case c == ')':
			depth--
		}
		p.pos++
	}
	return out
}

// checkNoInbox refuses to turn the inbox off for statements that are not
// upserts, unless the operator asserted that they are idempotent.
func checkNoInbox(c Config, stmts []statement) error {
	if !c.NoInbox || c.Idempotent {
		return nil
	}
	for i, st := range stmts {
		if !upsert(st) {
			return fmt.Errorf("%s=off: statement %d is not an upsert (INSERT ... ON DUPLICATE KEY UPDATE, or REPLACE): "+
				"without the inbox a redelivered message would apply it twice; keep the inbox, or set %s=asserted "+
				"if the statement is idempotent another way", EnvInbox, i+1, EnvIdempotent)
		}
	}
	return nil
}
