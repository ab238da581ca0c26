package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/sluice-dev/sluice/internal/version"
)

// runVersion prints the version this binary was built from: the tag
// `make release` linked in, else what the Go toolchain recorded.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		return fail(stderr, "sluice version", fmt.Errorf("no arguments expected, got %q", fs.Args()), 2)
	}
	fmt.Fprintf(stdout, "sluice %s\n", version.String())
	return 0
}
