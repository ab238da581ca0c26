package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/internal/why"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/history"
)

// whyLookback is how many ticks before the last N `sluice why` reads, so
// that an event at the first of them (a disturbance's test looks back a few
// ticks) is seen.
const whyLookback = 10

// runWhy is `sluice why`: the last N ticks' reasons of a loop, from its
// HIST items (or a history file), the events that changed them, and what
// would change the reason in force.
func runWhy(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice why", "sluice why --loop ID [-n N] [--table T | --history FILE]",
		"Prints why the loop's rate was what it was at each of its last N ticks (one reason code and\n"+
			"sentence per tick, from the HIST items the controller writes), the events among them (a setpoint\n"+
			"edit, a disturbance, a burst after an idle queue, each change of reason), and what would change\n"+
			"the reason in force. The table comes from --table, else SLUICE_TABLE, else \"sluice\".")
	fs.SetOutput(stderr)
	id := fs.String("loop", "", "the loop id")
	n := fs.Int("n", 20, "ticks to print (0: all the history holds)")
	table := fs.String("table", envOr("SLUICE_TABLE", ddbstore.DefaultTable), "DynamoDB table")
	file := fs.String("history", "", "read a history file (sluice demo --history-out) instead of the table")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if *id == "" && *file == "" || fs.NArg() > 0 || *n < 0 {
		fmt.Fprintln(stderr, "sluice why: --loop ID (or --history FILE) is required, -n must not be negative, and no arguments follow the flags")
		return 2
	}
	points, name, err := whyPoints(context.Background(), *id, *table, *file, *n)
	if err != nil {
		return fail(stderr, "sluice why", err, 1)
	}
	return failIf(stderr, "sluice why", why.Print(stdout, name, points, *n), 1)
}

// whyPoints reads the loop's last n points (and whyLookback more; all when
// n is 0) from the table, or from a history file.
func whyPoints(ctx context.Context, id, table, file string, n int) ([]history.Point, string, error) {
	if file != "" {
		f, err := history.ReadFile(file, 0)
		if err != nil {
			return nil, "", err
		}
		return f.Points, cmpOr(id, f.Loop), nil
	}
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return nil, "", err
	}
	h := ddbhistory.New(dynamodb.NewFromConfig(cfg), table)
	limit := 0
	if n > 0 {
		limit = n + whyLookback
	}
	points, err := h.Last(ctx, id, limit)
	return points, id, err
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
