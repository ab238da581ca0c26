package mysqlsink

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/pkg/consume"
)

func TestParseStatements(t *testing.T) {
	tests := []struct {
		name   string
		text   string
		sql    []string
		params []string
		err    string
	}{
		{name: "upsert", text: "INSERT INTO orders (id, customer, total) VALUES (:json.order_id, :json.customer, :json.total) ON DUPLICATE KEY UPDATE total = VALUES(total)",
			sql:    []string{"INSERT INTO orders (id, customer, total) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE total = VALUES(total)"},
			params: []string{"json.order_id json.customer json.total"}},
		{name: "every kind", text: "INSERT INTO t VALUES (:id,:body,:json.a.b.0,:attr.trace-id,:attr.kafka.topic)",
			sql: []string{"INSERT INTO t VALUES (?,?,?,?,?)"}, params: []string{"id body json.a.b.0 attr.trace-id attr.kafka.topic"}},
		{name: "repeated", text: "UPDATE t SET a = :id WHERE b = :id", sql: []string{"UPDATE t SET a = ? WHERE b = ?"}, params: []string{"id id"}},
		{name: "two statements", text: "INSERT INTO a VALUES (:id);\n-- comment; with :semicolon\nUPDATE b SET n = n + 1 WHERE id = :json.x;\n",
			sql: []string{"INSERT INTO a VALUES (?)", "-- comment; with :semicolon\nUPDATE b SET n = n + 1 WHERE id = ?"}, params: []string{"id", "json.x"}},
		{name: "quotes and comments untouched", text: "INSERT INTO t (a, `b:c`, d) VALUES ('x:id; ''y''', \"z\\\":body\", :id) # :nope\n/* :nope; */",
			sql: []string{"INSERT INTO t (a, `b:c`, d) VALUES ('x:id; ''y''', \"z\\\":body\", ?) # :nope\n/* :nope; */"}, params: []string{"id"}},
		{name: "assignment is no placeholder", text: "SET @x := :id", sql: []string{"SET @x := ?"}, params: []string{"id"}},
		{name: "attr ends before a trailing dot", text: "SELECT :attr.a.", sql: []string{"SELECT ?."}, params: []string{"attr.a"}},
		{name: "unknown placeholder", text: "INSERT INTO t VALUES (:nope)", err: "unknown placeholder :nope"},
		{name: "json without path", text: "INSERT INTO t VALUES (:json.)", err: "has no path"},
		{name: "attr without name", text: "INSERT INTO t VALUES (:attr.)", err: "has no name"},
		{name: "positional", text: "INSERT INTO t VALUES (?)", err: "use named placeholders"},
		{name: "only comments", text: "-- nothing\n;  ; /* x */", err: "no SQL statement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatements(tt.text)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.Is(err, ErrStatement) {
					t.Fatalf("parseStatements(%q) = %v, %v; want ErrStatement containing %q", tt.text, got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseStatements(%q): %v", tt.text, err)
			}
			var sqls, params []string
			for _, st := range got {
				sqls = append(sqls, st.sql)
				var names []string
				for _, p := range st.params {
					names = append(names, p.name)
				}
				params = append(params, strings.Join(names, " "))
			}
			if fmt.Sprintf("%q", sqls) != fmt.Sprintf("%q", tt.sql) || fmt.Sprint(params) != fmt.Sprint(tt.params) {
				t.Errorf("parseStatements(%q) = %q %q; want %q %q", tt.text, sqls, params, tt.sql, tt.params)
			}
		})
	}
}

func TestBind(t *testing.T) {
	st, err := parseStatements("SELECT :id, :body, :json.s, :json.i, :json.big, :json.dec, :json.t, :json.n, :json.o, :json.a.1, :json.o.k, :attr.h")
	if err != nil {
		t.Fatal(err)
	}
	m := consume.Message{ID: "m1", Attributes: map[string]string{"h": "v'; --"},
		Body: []byte(`{"s":"it's; x","i":-42,"big":18446744073709551615,"dec":12.50,"t":true,"n":null,"o":{"k": [1, 2]},"a":["x","y"]}`)}
	got, err := st[0].bind(m, &body{raw: m.Body})
	if err != nil {
		t.Fatal(err)
	}
	want := []any{"m1", string(m.Body), "it's; x", int64(-42), uint64(18446744073709551615), "12.50", true, nil, `{"k":[1,2]}`, "y", "[1,2]", "v'; --"}
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Errorf("bind = %#v\nwant %#v", got, want)
	}
}

func TestBindPoison(t *testing.T) {
	tests := []struct{ sql, body, want string }{
		{"SELECT :json.customer.id", `{"order_id":1}`, "no JSON path customer"},
		{"SELECT :json.customer.id", `{"customer":"bob"}`, "customer.id: missing (its parent is a string"},
		{"SELECT :json.a.5", `{"a":[1]}`, "a.5: missing (an array of 1 elements)"},
		{"SELECT :json.x", `not json`, "not a JSON object"},
		{"SELECT :attr.trace", `{}`, `no attribute "trace"`},
	}
	for _, tt := range tests {
		st, err := parseStatements(tt.sql)
		if err != nil {
			t.Fatal(err)
		}
		m := consume.Message{ID: "m", Body: []byte(tt.body)}
		_, err = st[0].bind(m, &body{raw: m.Body})
		var pe *poisonError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("bind(%s, %s) = %v; want poison containing %q", tt.sql, tt.body, err, tt.want)
		}
	}
}

// FuzzParseStatements checks that the parser never panics and that it
// replaces exactly one byte (":" and its name) by each "?".
func FuzzParseStatements(f *testing.F) {
	for _, s := range []string{"INSERT INTO t VALUES (:id, :json.a.b, :attr.x-y)", "SELECT ':id'; -- :x\n", "/* unterminated", "'open", "`a", ":attr.", "a;;b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		sts, err := parseStatements(text)
		if err != nil {
			return
		}
		for _, st := range sts {
			if st.sql == "" {
				t.Errorf("empty statement from %q", text)
			}
			if n := strings.Count(st.sql, "?"); n < len(st.params) {
				t.Errorf("%q: %d ? for %d params", st.sql, n, len(st.params))
			}
		}
	})
}

func TestMultiRow(t *testing.T) {
	tests := []struct {
		text string
		want string // the statement for 2 rows; "" when it has no multi-row form
	}{
		{upsertText, "INSERT INTO orders (id, total) VALUES (?, ?),(?, ?) ON DUPLICATE KEY UPDATE total = VALUES(total)"},
		{"REPLACE INTO t VALUE (:id, ':x(', (SELECT 1))", "REPLACE INTO t VALUE (?, ':x(', (SELECT 1)),(?, ':x(', (SELECT 1))"},
		{"INSERT INTO t VALUES (:id) AS n ON DUPLICATE KEY UPDATE b = n.b", "INSERT INTO t VALUES (?),(?) AS n ON DUPLICATE KEY UPDATE b = n.b"},
		{"INSERT INTO t VALUES (:id) ON DUPLICATE KEY UPDATE b = :json.b", ""}, // a placeholder outside the tuple
		{"INSERT INTO t VALUES (:id), (:body)", ""},
		{"INSERT INTO t SELECT :id", ""},
		{"INSERT INTO t SET a = :id", ""},
		{"UPDATE t SET a = 1 WHERE id IN (SELECT b FROM u WHERE c = :id)", ""},
		{"INSERT INTO t VALUES (1)", ""},
	}
	for _, tt := range tests {
		st, err := parseStatements(tt.text)
		if err != nil {
			t.Fatal(err)
		}
		r, ok := multiRow(st[0])
		if got := r.sql(2); ok != (tt.want != "") || ok && got != tt.want {
			t.Errorf("multiRow(%q) = %q, %v; want %q", tt.text, got, ok, tt.want)
		}
	}
}

const upsertText = "INSERT INTO orders (id, total) VALUES (:json.id, :json.total) ON DUPLICATE KEY UPDATE total = VALUES(total)"
