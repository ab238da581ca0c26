// Command sluice is the command-line tool of Sluice: the lab (step tests,
// identification, tuning, closed-loop comparisons), the embedded demo, the
// parameter editor, the dashboard, and the MySQL consumers' statement check
// and migrations.
package main

import (
	"fmt"
	"io"
	"os"
)

// command is one subcommand: it parses its own flags from args and returns
// the process exit code.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands lists the subcommands. Each lives in its own file.
func commands() []command {
	return []command{
		{name: "demo", summary: "the whole loop on a simulated database, no services, in accelerated time", run: runDemo},
		{name: "lab", summary: "laboratory: step tests, identification, closed-loop comparisons", run: group("lab", "experiment", labCommands)},
		{name: "tune", summary: "PI/PID gains from a plant model (SIMC, IMC, Ziegler-Nichols, Cohen-Coon)", run: runTune},
		{name: "dashboard", summary: "web dashboard: live charts and parameter edits (--demo: no services)", run: runDashboard},
		{name: "params", summary: "get, set and validate a loop's PARAMS item (the controller's validation)", run: runParams},
		{name: "pause", summary: "pause a loop: RATE 0, its event source mapping off, nothing lost however long (--loop ID)", run: runPause},
		{name: "resume", summary: "resume a paused loop: the mapping on, the controllers from the model's rate (--loop ID)", run: runResume},
		{name: "local", summary: "local stand-ins for AWS: scheduler, SQS poller, CPU publisher, load generator", run: group("local", "stand-in", localCommands)},
		{name: "mysql", summary: "check a MySQL consumer statement against the database (check)", run: group("mysql", "command", mysqlCommands)},
		{name: "why", summary: "why a loop's rate is what it is: the last ticks' reasons and what would change them", run: runWhy},
		{name: "doctor", summary: "check a deployment's queue, DLQ, function, mapping and loop against the rules", run: runDoctor},
		{name: "version", summary: "the version of this build (the release tag, or the VCS revision)", run: runVersion},
		{name: "migrate", summary: "create or upgrade the tables of the MySQL consumers (inbox, messages)", run: runMigrate},
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'sluice <command> -h' for the flags of a command.")
}

// run dispatches to a subcommand. Exit codes: 0 success, 1 the command failed,
// 2 bad usage or bad input.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// fail reports err as command name's failure on stderr and returns code, the
// command's exit status.
func fail(stderr io.Writer, name string, err error, code int) int {
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	return code
}

// failIf is fail when err is not nil, else 0 (success).
func failIf(stderr io.Writer, name string, err error, code int) int {
	if err == nil {
		return 0
	}
	return fail(stderr, name, err, code)
}
