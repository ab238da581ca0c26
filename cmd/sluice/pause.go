package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/loop"
)

const pauseHelp = `Pause a loop: set its PARAMS attribute paused, checked by the controller's
validation and written conditionally on the item read (as sluice params set
paused=true). At its next tick (within a minute) the controller writes RATE 0,
turns the loop's event source mapping off (esm_uuid: a Lambda consumer then
receives nothing, so nothing counts toward maxReceiveCount) and holds its
controllers; the workers stop receiving and keep their leases. Nothing is lost
however long the pause. sluice resume removes the attribute: the mapping is
turned on and the controllers restart from the model's rate.`

func runPause(args []string, stdout, stderr io.Writer) int {
	return paramsEnv{open: openDynamoStore}.pause(true, args, stdout, stderr)
}

func runResume(args []string, stdout, stderr io.Writer) int {
	return paramsEnv{open: openDynamoStore}.pause(false, args, stdout, stderr)
}

// pause sets (on) or removes (resume) the loop's paused attribute.
func (e paramsEnv) pause(on bool, args []string, stdout, stderr io.Writer) int {
	name := map[bool]string{true: "sluice pause", false: "sluice resume"}[on]
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	loopID := fs.String("loop", "", "loop id (the items' partition key)")
	table := fs.String("table", ddbstore.TableFromEnv(), "DynamoDB table (default: SLUICE_TABLE or sluice)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: %s --loop ID [--table T] [--json]\n\n%s\n\nFlags:\n", name, pauseHelp)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *loopID == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "%s: want --loop ID and no arguments\n", name)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	store, err := e.open(ctx, *table)
	if err != nil {
		return fail(stderr, name, err, 1)
	}
	ed := edit{name: loop.AttrPaused, value: true}
	if !on {
		ed = edit{name: loop.AttrPaused, remove: true}
	}
	who, err := e.who(ctx)
	if err != nil {
		return fail(stderr, name, err, 1)
	}
	return paramsSet(ctx, store, *loopID, []edit{ed}, audit{who: who, at: time.Now()}, *asJSON, stdout, stderr)
}
