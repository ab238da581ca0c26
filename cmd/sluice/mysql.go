package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/mysqlsink"
	"github.com/sluice-dev/sluice/pkg/consume"
)

func mysqlCommands() []command {
	return []command{
		{name: "check", summary: "check a consumer statement against the database and show what a message binds", run: runMySQLCheck},
	}
}

// attrFlag collects repeated --attr NAME=VALUE.
type attrFlag map[string]string

func (a attrFlag) String() string { return fmt.Sprint(map[string]string(a)) }

func (a attrFlag) Set(v string) error {
	name, value, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=VALUE, got %q", v)
	}
	a[name] = value
	return nil
}

// dsnFlag is --dsn, defaulting to SLUICE_MYSQL_DSN.
func dsnFlag(fs *flag.FlagSet) *string {
	return fs.String("dsn", os.Getenv("SLUICE_MYSQL_DSN"), "go-sql-driver DSN, user:password@tcp(host:3306)/database (default $SLUICE_MYSQL_DSN)")
}

func runMySQLCheck(args []string, stdout, stderr io.Writer) int {
	const name = "sluice mysql check"
	fs := newFlagSet(name, name+" --dsn DSN (--statement SQL | --statement-file FILE) [--message FILE [--id ID] [--attr NAME=VALUE ...]]",
		"Check a consumer's statement (SLUICE_MYSQL_STATEMENT) against the database: it must parse,\n"+
			"use only :id, :body, :json.PATH and :attr.NAME, and prepare. With --message (a sample\n"+
			"message body) it shows the parameters the message binds and runs the statement in a\n"+
			"transaction that is rolled back: nothing is written. Exit codes: 0 the statement works\n"+
			"(and the sample would be stored), 1 it does not (the database's reason on stderr), 2 bad usage.")
	dsn := dsnFlag(fs)
	text := fs.String("statement", "", "the statement(s), as in SLUICE_MYSQL_STATEMENT")
	file := fs.String("statement-file", "", "a file of statements, as in SLUICE_MYSQL_STATEMENT_FILE")
	message := fs.String("message", "", "a file holding a sample message body")
	id := fs.String("id", "sample-1", "the sample message's id (:id)")
	attrs := attrFlag{}
	fs.Var(attrs, "attr", "a sample message attribute NAME=VALUE (:attr.NAME); repeatable")
	timeout := fs.Duration("timeout", 30*time.Second, "give up after this long")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	statement, sample, err := checkInputs(*text, *file, *message, *id, attrs)
	if err == nil && *dsn == "" {
		err = fmt.Errorf("--dsn (or SLUICE_MYSQL_DSN) is required")
	}
	if err != nil {
		return fail(stderr, name, err, 2)
	}
	return withMySQL(name, *dsn, *timeout, stderr, func(ctx context.Context, db *sql.DB) int {
		checked, err := mysqlsink.Check(ctx, db, statement, sample)
		printChecked(stdout, checked, sample != nil)
		if err != nil {
			return fail(stderr, name, err, 1)
		}
		if sample != nil {
			fmt.Fprintln(stdout, "ok: the statement prepares and the sample message would be stored; nothing was written (rolled back)")
		} else {
			fmt.Fprintln(stdout, "ok: the statement prepares (give --message to bind a sample)")
		}
		return 0
	})
}

// withMySQL runs f on the database dsn (TLS as SLUICE_MYSQL_CA and
// SLUICE_MYSQL_TLS say, as the consumers') under a context that ends after
// timeout and returns its exit code, or 2 when dsn does not open.
func withMySQL(name, dsn string, timeout time.Duration, stderr io.Writer, f func(context.Context, *sql.DB) int) int {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	conn, err := mysqlsink.ConnFromEnv(os.Getenv, mysqlsink.Conn{MaxOpen: 2, MaxIdle: 2})
	if err != nil {
		return fail(stderr, name, err, 2)
	}
	db, err := mysqlsink.Open(dsn, conn)
	if err != nil {
		return fail(stderr, name, err, 2)
	}
	defer db.Close()
	return f(ctx, db)
}

// checkInputs reads the statement and the sample message from the flags.
func checkInputs(text, file, message, id string, attrs map[string]string) (string, *consume.Message, error) {
	switch {
	case text != "" && file != "":
		return "", nil, fmt.Errorf("give --statement or --statement-file, not both")
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", nil, err
		}
		text = string(b)
	case text == "":
		return "", nil, fmt.Errorf("--statement or --statement-file is required")
	}
	if message == "" {
		return text, nil, nil
	}
	body, err := os.ReadFile(message)
	if err != nil {
		return "", nil, err
	}
	return text, &consume.Message{ID: id, Body: body, Attributes: attrs}, nil
}

func printChecked(w io.Writer, checked []mysqlsink.Checked, bound bool) {
	for i, c := range checked {
		fmt.Fprintf(w, "statement %d: %s\n", i+1, c.SQL)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for k, p := range c.Params {
			if bound {
				typ, val := describe(p.Value)
				fmt.Fprintf(tw, "  ?%d\t%s\t%s\t%s\n", k+1, p.Placeholder, typ, val)
			} else {
				fmt.Fprintf(tw, "  ?%d\t%s\n", k+1, p.Placeholder)
			}
		}
		tw.Flush()
		if c.RowsAffected >= 0 {
			fmt.Fprintf(w, "  rows affected: %d (rolled back)\n", c.RowsAffected)
		}
	}
}

// describe names a bound value's SQL type and shows it.
func describe(v any) (string, string) {
	switch x := v.(type) {
	case nil:
		return "NULL", "NULL"
	case string:
		return "string", fmt.Sprintf("%q", x)
	case bool:
		return "bool", fmt.Sprint(x)
	}
	return fmt.Sprintf("%T", v), fmt.Sprint(v)
}

func runMigrate(args []string, stdout, stderr io.Writer) int {
	const name = "sluice migrate"
	fs := newFlagSet(name, name+" --dsn DSN [--prefix P]",
		"Create or upgrade the tables the MySQL consumers use, as they do at start: <prefix>schema_migrations\n"+
			"(what was applied), <prefix>sluice_inbox (exactly-once), <prefix>messages (the default table).\n"+
			"Exit codes: 0 done, 1 failed, 2 bad usage.")
	dsn := dsnFlag(fs)
	prefix := fs.String("prefix", os.Getenv("SLUICE_MYSQL_PREFIX"), "table prefix, as in SLUICE_MYSQL_PREFIX")
	timeout := fs.Duration("timeout", time.Minute, "give up after this long")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	if *dsn == "" {
		fmt.Fprintf(stderr, "%s: --dsn (or SLUICE_MYSQL_DSN) is required\n", name)
		return 2
	}
	return withMySQL(name, *dsn, *timeout, stderr, func(ctx context.Context, db *sql.DB) int {
		if err := mysqlsink.MigratePrefix(ctx, db, *prefix); err != nil {
			return fail(stderr, name, err, 1)
		}
		fmt.Fprintf(stdout, "migrated: %[1]sschema_migrations, %[1]ssluice_inbox, %[1]smessages\n", *prefix)
		return 0
	})
}
