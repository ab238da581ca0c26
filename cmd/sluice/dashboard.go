package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/internal/dashboard"
	"github.com/sluice-dev/sluice/internal/dashboard/stepdemo"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbhistory"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
)

// dashboardConfig is the `sluice dashboard` command line.
type dashboardConfig struct {
	listen  string
	token   string
	hosts   []string
	table   string
	demo    bool
	speed   float64
	prefill int
	traffic stepdemo.Traffic
	// user and userHeader are who edits are recorded as (dashboard.Config).
	user, userHeader string
}

// dashboardUser is the dashboard's default user: "dashboard:" and the
// account that runs it.
func dashboardUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return "dashboard:" + u.Username
	}
	return "dashboard"
}

func parseDashboard(args []string, stderr io.Writer) (dashboardConfig, error) {
	var c dashboardConfig
	fs := newFlagSet("sluice dashboard", "sluice dashboard [--listen ADDR] [--token-file FILE] [--allowed-host NAME,...] [--table NAME] [--demo [--speed X] [--prefill N]]",
		"Serves the web dashboard: live charts of every loop in the table and a form\n"+
			"that edits its PARAMS item. AWS configuration comes from the usual chain\n"+
			"(AWS_PROFILE, AWS_REGION, ...; AWS_ENDPOINT_URL for moto_server or LocalStack).")
	fs.SetOutput(stderr)
	fs.StringVar(&c.listen, "listen", "127.0.0.1:8080", "`address` to listen on, host:port; a non-loopback host requires a token")
	tokenFile := fs.String("token-file", "", "`file` holding the token that writes must carry (Authorization: Bearer, or the form's token field); default $SLUICE_DASHBOARD_TOKEN. Never on the command line, where ps shows it")
	hosts := fs.String("allowed-host", "", "comma-separated host `names` the browser may use to reach the dashboard (its Host header); default the loopback names and the --listen host. Others are refused (DNS rebinding)")
	fs.StringVar(&c.table, "table", envOr("SLUICE_TABLE", "sluice"), "DynamoDB `table` holding the loops' PARAMS, STATE, RATE and HIST items; default $SLUICE_TABLE or sluice")
	fs.StringVar(&c.user, "user", dashboardUser(), "who the dashboard's edits are recorded as (PARAMS updated_by)")
	fs.StringVar(&c.userHeader, "user-header", "", "request `header` that an authenticating proxy in front of the dashboard sets to its user (e.g. X-Forwarded-User): edits are recorded as that user")
	fs.BoolVar(&c.demo, "demo", false, "serve the embedded demo: simulated plant, in-memory stores, accelerated time, no AWS")
	fs.Float64Var(&c.speed, "speed", 60, "demo only: simulated seconds per real second (60: one 60 s controller tick per second)")
	fs.IntVar(&c.prefill, "prefill", 120, "demo only: controller `ticks` simulated before serving, so that the charts start full")
	fs.StringVar(&c.traffic.Scenario, "scenario", "", "demo only: traffic reference (default), idle-burst or diurnal, scaled to the demo's plant; or shared: three queues into one database (a destination and its members, weights 3:2:1)")
	fs.Var(newProducerChangesFlag(&c.traffic.ProducerChanges), "producer-change", "demo only: producers' rate AT=RATE from the demo's start, prefill included (repeatable or comma-separated)")
	fs.BoolVar(&c.traffic.Inner, "inner-loop", false, "demo only: the consumers run the inner loop on the destination's latency (PARAMS inner_loop), which the latency chart shows")
	fs.Var(newBurstsFlag(&c.traffic.Bursts), "burst", "demo only: N messages enqueued at once AT=N from the demo's start, prefill included (repeatable or comma-separated)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.speed <= 0 || c.prefill < 0 {
		return c, errors.New("--speed must be positive and --prefill not negative")
	}
	var err error
	if c.token, err = readToken(*tokenFile, os.Getenv("SLUICE_DASHBOARD_TOKEN")); err != nil {
		return c, err
	}
	c.hosts = allowedHosts(c.listen, *hosts)
	if err := dashboard.CheckListen(c.listen, c.token); err != nil {
		return c, err
	}
	return c, nil
}

// minTokenLength is the shortest token the dashboard accepts.
const minTokenLength = 16

// readToken returns the token from file (its first line) or else env; ""
// when neither gives one. A token shorter than minTokenLength is refused.
func readToken(file, env string) (string, error) {
	tok := env
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("--token-file: %w", err)
		}
		tok, _, _ = strings.Cut(string(b), "\n")
	}
	tok = strings.TrimSpace(tok)
	if tok != "" && len(tok) < minTokenLength {
		return "", fmt.Errorf("the token has %d characters; want at least %d (e.g. openssl rand -hex 16)", len(tok), minTokenLength)
	}
	return tok, nil
}

// allowedHosts are the names of --allowed-host, plus the --listen host
// when it names one (not 0.0.0.0 or ::); none means the loopback names.
func allowedHosts(listen, flagValue string) []string {
	var out []string
	for _, h := range strings.Split(flagValue, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	host, _, err := net.SplitHostPort(listen)
	if ip := net.ParseIP(host); err == nil && host != "" && (ip == nil || !ip.IsUnspecified()) {
		out = append(out, host)
		if ip != nil && ip.IsLoopback() || host == "localhost" {
			out = append(out, "localhost", "127.0.0.1", "::1")
		}
	}
	return out
}

// newHTTPServer is the dashboard's HTTP server: besides the header timeout,
// bounded reads and writes (a slow client holds no connection for long) and
// idle keep-alive connections closed after two minutes.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, IdleTimeout: 2 * time.Minute}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func runDashboard(args []string, stdout, stderr io.Writer) int {
	c, err := parseDashboard(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return fail(stderr, "sluice dashboard", err, 2)
	}
	ctx, stop := signalContext()
	defer stop()
	return failIf(stderr, "sluice dashboard", serveDashboard(ctx, c, stdout, stderr, nil), 1)
}

// serveDashboard builds the adapters for c and serves until ctx is done.
// ready, when not nil, receives the base URL once the listener is open.
func serveDashboard(ctx context.Context, c dashboardConfig, stdout, stderr io.Writer, ready func(url string)) error {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := dashboard.Config{Token: c.token, AllowedHosts: c.hosts, Logger: log, Fields: dashboard.LoopFields(),
		User: c.user, UserHeader: c.userHeader}
	var background func(ctx context.Context) error
	var err error
	if c.demo {
		background, err = demoDashboard(ctx, c, &cfg)
	} else {
		err = tableDashboard(ctx, c, &cfg)
	}
	if err != nil {
		return err
	}
	srv, err := dashboard.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.listen, err)
	}
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(stdout, "sluice dashboard: %s (%s)\n", url, cfg.Title)
	hs := newHTTPServer(srv)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()
	if background != nil {
		go func() { errc <- background(ctx) }()
	}
	if ready != nil {
		ready(url)
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer scancel()
	_ = hs.Shutdown(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// demoDashboard sets cfg's sources to the simulated demo loop of c
// (prefilled, sped up) and returns what runs it in the background.
func demoDashboard(ctx context.Context, c dashboardConfig, cfg *dashboard.Config) (func(ctx context.Context) error, error) {
	tick := time.Duration(float64(stepdemo.Tick) / c.speed)
	start := time.Now().UTC().Truncate(time.Minute).Add(-time.Duration(c.prefill) * stepdemo.Tick)
	var d *stepdemo.Demo
	var err error
	if c.traffic.Scenario == sharedScenario {
		d, err = stepdemo.NewShared(start, uint64(start.Unix())) // several queues into one database
	} else {
		d, err = stepdemo.NewWithTraffic(start, uint64(start.Unix()), c.traffic)
	}
	if err != nil {
		return nil, err
	}
	for range c.prefill {
		if err := d.Step(ctx); err != nil {
			return nil, err
		}
	}
	cfg.History, cfg.Params, cfg.Writer, cfg.Validator, cfg.Loops = d.History(), d.Params(), d.Params(), d.Params(), d
	cfg.Title = fmt.Sprintf("demo · simulated plant · %gx time", c.speed)
	return func(ctx context.Context) error {
		t := time.NewTicker(tick)
		defer t.Stop()
		return d.Run(ctx, t.C)
	}, nil
}

// tableDashboard sets cfg's sources to c's DynamoDB table.
func tableDashboard(ctx context.Context, c dashboardConfig, cfg *dashboard.Config) error {
	awsCfg, err := awsconf.Load(ctx)
	if err != nil {
		return err
	}
	client := dynamodb.NewFromConfig(awsCfg)
	hist := ddbhistory.New(client, c.table)
	params := dashboard.NewLoopParams(ddbloop.New(client, c.table), time.Now)
	cfg.History, cfg.Params, cfg.Writer, cfg.Validator, cfg.Loops = hist, params, params, params, hist
	cfg.Title = "table " + c.table
	if ep := awsconf.Endpoint(); ep != "" {
		cfg.Title += " at " + ep
	}
	return nil
}
