package main

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
)

func TestLocalControllerUsage(t *testing.T) {
	t.Setenv("SLUICE_TABLE", "")
	testBadInput(t, []string{"local", "controller"}, []badInput{
		{nil, "--table is required"},
		{[]string{"--table", "t", "--bootstrap", "/nonexistent/bootstrap"}, "make controller-bootstrap"},
	})
}

// TestLocalControllerOnce runs the real bootstrap under the emulator
// against a fresh table of the local endpoint: its loop ticks and RATE is
// written.
func TestLocalControllerOnce(t *testing.T) {
	testenv.AWSEndpoint(t)
	rie := testenv.Binary(t, "SLUICE_RIE_BIN", "aws-lambda-rie")
	ctx := context.Background()
	bootstrap := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-o", bootstrap, "../../functions/controller")
	build.Env = append(build.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the controller: %v: %s", err, out)
	}
	client, table := ddbtest.Table(t, "sluice-localctl")
	store := ddbloop.New(client, table)
	if err := store.WriteParams(ctx, "mine", storetest.SampleParams("mine").Attrs(looptest.Sources())); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"local", "controller", "--table", table, "--once", "--bootstrap", bootstrap, "--rie", rie}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("sluice local controller --once = %d; stderr %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), `"Loop":"mine"`) {
		t.Errorf("stdout %q; want the loop's tick line", stdout.String())
	}
	if r, err := store.ReadRate(ctx, "mine"); err != nil || r.Tick != 1 {
		t.Errorf("RATE after one tick = %+v, %v; want tick 1", r, err)
	}
}
