package main

import (
	"fmt"
	"io"
)

// labCommands lists the subcommands of `sluice lab`. Each lives in its own
// file (lab_step.go, lab_compare.go, ...).
func labCommands() []command {
	return []command{
		{name: "step", summary: "open-loop step test on the simulated plant, then identification", run: runLabStep},
		{name: "identify", summary: "fit a first-order-plus-dead-time model to a step test CSV", run: runLabIdentify},
		{name: "balance", summary: "PID load balancing over nodes of different capacity vs round-robin", run: runLabBalance},
		{name: "compare", summary: "identify, tune and compare controllers in closed loop on the simulated plant", run: runLabCompare},
		{name: "step-mariadb", summary: "open-loop step test on the real MariaDB plant (same as step --plant mariadb)", run: runLabStepMariaDB},
		{name: "latency-mariadb", summary: "the consumers' store latency against the real MariaDB's CPU under external loads", run: runLabLatencyMariaDB},
		{name: "compare-mariadb", summary: "controllers in closed loop on the real MariaDB plant with a real disturbance", run: runLabCompareMariaDB},
	}
}

// group is the run function of command group whose subcommands sub lists
// (what: what a subcommand is, for the usage): see runGroup.
func group(name, what string, sub func() []command) func(args []string, stdout, stderr io.Writer) int {
	return func(args []string, stdout, stderr io.Writer) int {
		return runGroup(name, what, sub(), args, stdout, stderr)
	}
}

// runGroup dispatches a command with subcommands (`sluice lab <experiment>`,
// `sluice local <stand-in>`): usage on no argument (exit 2) or -h (exit 0),
// exit 2 on an unknown name.
func runGroup(group, what string, sub []command, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		w := stdout
		if len(args) == 0 {
			w = stderr
		}
		fmt.Fprintf(w, "usage: sluice %s <%s> [flags]\n\n", group, what)
		for _, c := range sub {
			fmt.Fprintf(w, "  %-16s %s\n", c.name, c.summary)
		}
		fmt.Fprintf(w, "\nRun 'sluice %s <%s> -h' for its flags.\n", group, what)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range sub {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "sluice %s: unknown %s %q\n", group, what, args[0])
	return 2
}
