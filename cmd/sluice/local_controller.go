package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/sluice-dev/sluice/internal/localaws"
	"github.com/sluice-dev/sluice/pkg/consume"
)

// localControllerConfig is what `sluice local controller` runs.
type localControllerConfig struct {
	table, bootstrap, rie string
	period                time.Duration
	once                  bool
}

func parseLocalController(args []string, stdout, stderr io.Writer) (localControllerConfig, int, bool) {
	const name = "sluice local controller"
	var c localControllerConfig
	fs := newFlagSet(name, name+" --table T [--period 1m] [--once] [--bootstrap FILE] [--rie FILE]",
		"Run the real controller bootstrap under the Lambda Runtime Interface Emulator against the\n"+
			"table T of the local endpoint (AWS_ENDPOINT_URL, e.g. moto_server) and invoke it on a\n"+
			"schedule, as the deployed EventBridge rule does. The function's log lines (one JSON line\n"+
			"per loop and tick) go to stdout. SLUICE_PROMETHEUS_URL and SLUICE_METRICS_NAMESPACE pass\n"+
			"through. `make controller-bootstrap` builds the bootstrap.")
	fs.StringVar(&c.table, "table", os.Getenv("SLUICE_TABLE"), "DynamoDB `table` of the loops (default $SLUICE_TABLE)")
	fs.DurationVar(&c.period, "period", time.Minute, "schedule period (the loops tick when due: tick_period)")
	fs.BoolVar(&c.once, "once", false, "invoke once and exit (exit 1 on a function error)")
	fs.StringVar(&c.bootstrap, "bootstrap", "bin/controller-host/bootstrap", "the controller bootstrap built for this machine")
	fs.StringVar(&c.rie, "rie", envOr("SLUICE_RIE_BIN", ".cache/bin/aws-lambda-rie"), "the aws-lambda-rie binary (default $SLUICE_RIE_BIN)")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return c, code, true
	}
	if c.table == "" || c.period <= 0 {
		fmt.Fprintf(stderr, "%s: --table is required and --period must be positive\n", name)
		return c, 2, true
	}
	for _, f := range []struct{ flag, path string }{{"--bootstrap", c.bootstrap}, {"--rie", c.rie}} {
		if _, err := os.Stat(f.path); err != nil {
			fmt.Fprintf(stderr, "%s: %s: %v (make controller-bootstrap builds the bootstrap; make up installs the emulator)\n", name, f.flag, err)
			return c, 2, true
		}
	}
	return c, 0, false
}

func runLocalController(args []string, stdout, stderr io.Writer) int {
	c, code, done := parseLocalController(args, stdout, stderr)
	if done {
		return code
	}
	ctx, stop := signalContext()
	defer stop()
	url, wait, err := startControllerRIE(ctx, c, stdout, stderr)
	if err != nil {
		return fail(stderr, "sluice local controller", err, 1)
	}
	defer wait()
	s := &localaws.Scheduler{Invoker: &localaws.RIE{URL: url}, Period: c.period, Clock: consume.WallClock{},
		Log: slog.New(slog.NewJSONHandler(stderr, nil))}
	return runSchedule(ctx, s, c.once, stderr, "sluice local controller", 1)
}

// startControllerRIE starts the emulator with the bootstrap on a free
// loopback port, the table in its environment, and waits until it answers.
// wait stops it (SIGTERM to its process group) and reaps it.
func startControllerRIE(ctx context.Context, c localControllerConfig, stdout, stderr io.Writer) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(c.rie, "--runtime-interface-emulator-address", addr, c.bootstrap)
	cmd.Env = append(os.Environ(), "SLUICE_TABLE="+c.table, "AWS_LAMBDA_FUNCTION_TIMEOUT=60")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("start %s: %w", c.rie, err)
	}
	wait := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		_ = cmd.Wait()
	}
	url := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(url + "/")
		if err == nil {
			resp.Body.Close()
			return url, wait, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			wait()
			return "", nil, fmt.Errorf("the emulator at %s did not answer: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
