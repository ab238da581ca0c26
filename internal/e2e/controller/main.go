// Command controller is the controller's end-to-end run (`make
// e2e-controller`): it starts moto_server, applies localstack/init/10-controller.sh
// to it, publishes CPU datapoints to CloudWatch, and ticks the controller's
// real bootstrap under two AWS Lambda Runtime Interface Emulators (one
// invocation at a time each, so two give real concurrency) with a real
// scheduled-event payload: single ticks, pairs of concurrent ticks, a valid
// parameter edit with the aws CLI, and more than 20 distinct invalid edits.
// It stops what it started and prints one JSON object as its last line; it
// exits 1 when a target is missed.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/sluice-dev/sluice/functions/controller/invocation"
	"github.com/sluice-dev/sluice/internal/e2e/controller/harness"
	"github.com/sluice-dev/sluice/internal/e2e/e2ekit"
	"github.com/sluice-dev/sluice/internal/e2e/verdict"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/cwmetric"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/looptest"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

const (
	table  = "sluice-e2e"
	loopID = "e2e"
	dbID   = "e2e-db"
)

// result is the last line.
type result struct {
	Ticks                       int     `json:"ticks"`
	Invocations                 int     `json:"invocations"`
	ConcurrentPairs             int     `json:"concurrent_pairs"`
	ConcurrentRaces             int     `json:"concurrent_races"`
	RateWrites                  int     `json:"rate_writes"`
	ConcurrentWinnersPerTickMax int     `json:"concurrent_winners_per_tick_max"`
	StateVersion                int64   `json:"state_version"`
	InvalidEditsTried           int     `json:"invalid_edits_tried"`
	InvalidEditsRejected        int     `json:"invalid_edits_rejected"`
	ParamEditApplied            bool    `json:"param_edit_applied"`
	ShadowLeftRate              bool    `json:"shadow_left_rate"`
	ManualRateApplied           bool    `json:"manual_rate_applied"`
	BumplessBackToAuto          bool    `json:"bumpless_back_to_auto"`
	StaleFailedClosed           bool    `json:"stale_failed_closed"`
	StaleResumedBumpless        bool    `json:"stale_resumed_bumpless"`
	IsolationOK                 bool    `json:"isolation_ok"`
	BoundsEditFollowed          bool    `json:"bounds_edit_followed"`
	ManualRateNextTick          bool    `json:"manual_rate_next_tick"`
	ConcurrentEditConflict      bool    `json:"concurrent_edit_conflict"`
	DashboardRebindingRefused   bool    `json:"dashboard_rebinding_refused"`
	RateBeforeEdit              float64 `json:"rate_before_edit"`
	RateAfterEdit               float64 `json:"rate_after_edit"`
	verdict.Verdict
}

// config is the harness's flags.
type config struct {
	bootstrap, eventFile, logDir, initScript string
}

type run struct {
	e2ekit.Harness[config, result]
	moto    *harness.Moto
	ries    []*harness.RIE
	payload []byte
	store   *ddbloop.Store
	cw      *cloudwatch.Client
	winners map[int64]int // STATE version -> invocations that applied it
	logDir  string
}

func main() {
	var c config
	flag.StringVar(&c.bootstrap, "bootstrap", "bin/controller-host/bootstrap", "controller bootstrap built for this machine")
	flag.StringVar(&c.eventFile, "event", "functions/controller/testdata/scheduled-event.json", "scheduled-event payload")
	flag.StringVar(&c.logDir, "logs", "", "directory for the logs of moto_server and the emulators (default: a temporary directory)")
	flag.StringVar(&c.initScript, "init", "localstack/init/10-controller.sh", "init script that creates the table and the default loop")
	flag.Parse()
	r := &run{winners: map[int64]int{}}
	os.Exit(r.Execute("e2e-controller", c, 8*time.Minute, r.setup, r.scenario, &r.Res.Verdict))
}

// setup starts moto_server with the init script applied, the loop ticking
// every second on CPU 60, a fake Prometheus and two emulators of the
// controller's bootstrap; the end of the run stops them.
func (r *run) setup() error {
	c := r.Cfg
	ctx := r.Ctx
	var err error
	if r.payload, err = os.ReadFile(c.eventFile); err != nil {
		return fmt.Errorf("read event: %w", err)
	}
	rie, err := harness.FindBinary("SLUICE_RIE_BIN", "aws-lambda-rie", ".cache/bin/aws-lambda-rie")
	if err != nil {
		return err
	}
	bootstrap := c.bootstrap
	if _, err := os.Stat(bootstrap); err != nil {
		return fmt.Errorf("bootstrap: %w (make e2e-controller builds it)", err)
	}
	if bootstrap, err = filepath.Abs(bootstrap); err != nil {
		return err
	}
	env, err := r.startMoto()
	if err != nil {
		return err
	}
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return err
	}
	r.store = ddbloop.New(dynamodb.NewFromConfig(cfg), table)
	r.cw = cwmetric.NewClient(cfg, r.moto.Endpoint)

	// Ticks a second apart: the loop's tick period becomes 1 s (an edit
	// with the aws CLI, as an operator would).
	if err := r.awsUpdate(`SET tick_period = :t, rate_ttl = :ttl, slew_limit = :s, setpoint_filter = :f`,
		`{":t": {"S": "1s"}, ":ttl": {"S": "3s"}, ":s": {"N": "0"}, ":f": {"S": "0s"}}`); err != nil {
		return err
	}
	if err := r.publishCPU(60); err != nil {
		return err
	}
	return r.startEmulators(rie, bootstrap, env)
}

// startMoto starts moto_server (logs in -logs, else a temporary
// directory), sets this process's environment to it and applies the init
// script; it returns moto's environment.
func (r *run) startMoto() ([]string, error) {
	c := r.Cfg
	r.logDir = c.logDir
	var err error
	if r.logDir == "" {
		if r.logDir, err = os.MkdirTemp("", "e2e-controller-"); err != nil {
			return nil, err
		}
	}
	r.Logf("starting moto_server (logs in %s)", r.logDir)
	if r.moto, err = harness.StartMoto(r.Ctx, os.Getenv("SLUICE_MOTO_BIN"), r.logDir); err != nil {
		return nil, err
	}
	r.Defer(r.moto.Stop)
	env := r.moto.Env()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	r.Logf("moto_server on %s; applying %s", r.moto.Endpoint, c.initScript)
	initCmd := exec.CommandContext(r.Ctx, "bash", c.initScript)
	initCmd.Env = append(os.Environ(), "SLUICE_TABLE="+table, "SLUICE_LOOP="+loopID, "SLUICE_DB_INSTANCE="+dbID)
	if out, err := initCmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("init script: %v: %s", err, out)
	}
	return env, nil
}

// startEmulators starts the fake Prometheus and two emulators of
// bootstrap under rie with moto's environment env.
func (r *run) startEmulators(rie, bootstrap string, env []string) error {
	prom, promURL, err := startFakePrometheus()
	if err != nil {
		return err
	}
	r.Defer(func() { prom.srv.Close() })
	fnEnv := append(env, "SLUICE_TABLE="+table, "SLUICE_METRICS_NAMESPACE=SluiceE2E", "SLUICE_PROMETHEUS_URL="+promURL)
	for i := range 2 {
		p, err := harness.StartRIE(r.Ctx, rie, bootstrap, r.logDir, fmt.Sprintf("rie-%d", i+1), fnEnv)
		if err != nil {
			return err
		}
		r.Defer(p.Stop)
		r.ries = append(r.ries, p)
	}
	r.Logf("two emulators up: %s, %s", r.ries[0].InvokeURL, r.ries[1].InvokeURL)
	return nil
}

// scenario runs the checks in order; the first error ends it.
func (r *run) scenario() error {
	for _, step := range []func() error{
		r.ticks,        // 1. single ticks, 2. pairs of concurrent invocations
		r.validEdit,    // 3. a valid edit with the aws CLI
		r.modes,        // shadow, manual, back to auto
		r.invalidEdits, // 4. invalid edits, each refused
		r.backToValid,  // 5. back to valid, and the loop carries on
		r.stale,        // 6. the metric goes stale
		r.final,        // STATE, RATE and the counts agree
		r.operators,    // 7. operators' edits take effect at the next tick
		func() error { return r.dashboardEdits(r.logDir) }, // 8. the dashboard
		r.isolation, // 9. one bad loop among ten stops none of the others
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// ticks makes three single ticks, then four pairs of concurrent
// invocations.
func (r *run) ticks() error {
	for range 3 {
		if err := r.tickOnce(); err != nil {
			return err
		}
	}
	for range 4 {
		if err := r.tickPair(); err != nil {
			return err
		}
	}
	return nil
}

// validEdit edits the setpoint 70 -> 40 with the aws CLI with CPU at 60,
// which turns the rate from rising to falling at the next tick.
func (r *run) validEdit() error {
	ctx := r.Ctx
	before, err := r.store.ReadState(ctx, loopID)
	if err != nil {
		return err
	}
	prev, _, err := r.tick()
	if err != nil {
		return err
	}
	if err := r.awsUpdate(`SET setpoint = :s`, `{":s": {"N": "40"}}`); err != nil {
		return err
	}
	after, _, err := r.tick()
	if err != nil {
		return err
	}
	status, err := r.store.ReadStatus(ctx, loopID)
	if err != nil {
		return err
	}
	r.Res.RateBeforeEdit, r.Res.RateAfterEdit = prev.Rate, after.Rate
	// With CPU at 60 the rate held or rose under setpoint 70; under 40 it
	// must fall.
	r.Res.ParamEditApplied = after.Setpoint == 40 && status.Status == loop.StatusApplied &&
		prev.Rate >= before.Rate && after.Rate < prev.Rate
	if !r.Res.ParamEditApplied {
		r.Fail("valid edit: setpoint %v, status %q, rates %v -> %v -> %v; want setpoint 40 applied and the rate falling after holding or rising",
			after.Setpoint, status.Status, before.Rate, prev.Rate, after.Rate)
	}
	r.Logf("valid edit applied: setpoint 40, rate %.1f -> %.1f", prev.Rate, after.Rate)
	return nil
}

// backToValid ticks once after the last invalid edit was undone: the
// parameters are applied again.
func (r *run) backToValid() error {
	if err := r.tickOnce(); err != nil {
		return err
	}
	if st, err := r.store.ReadStatus(r.Ctx, loopID); err != nil || st.Status != loop.StatusApplied {
		r.Fail("after undoing the last invalid edit: PARAMS_STATUS %+v, %v; want applied", st, err)
	}
	return nil
}

// final checks that STATE, RATE and the counts agree: one winner per
// concurrent tick, a STATE version per tick applied, every invalid edit
// refused.
func (r *run) final() error {
	ctx := r.Ctx
	final, err := r.store.ReadState(ctx, loopID)
	if err != nil {
		return err
	}
	r.Res.StateVersion = final.Version
	for _, n := range r.winners {
		r.Res.ConcurrentWinnersPerTickMax = max(r.Res.ConcurrentWinnersPerTickMax, n)
	}
	if r.Res.ConcurrentWinnersPerTickMax != 1 {
		r.Fail("concurrent_winners_per_tick_max = %d; want 1", r.Res.ConcurrentWinnersPerTickMax)
	}
	if final.Version != int64(r.Res.Ticks) {
		r.Fail("STATE version %d != ticks applied %d", final.Version, r.Res.Ticks)
	}
	if r.Res.Ticks < 5 {
		r.Fail("ticks = %d; want at least 5", r.Res.Ticks)
	}
	if r.Res.InvalidEditsTried < 20 || r.Res.InvalidEditsRejected != r.Res.InvalidEditsTried {
		r.Fail("invalid edits: %d tried, %d rejected; want at least 20, all rejected", r.Res.InvalidEditsTried, r.Res.InvalidEditsRejected)
	}
	rate, err := r.store.ReadRate(ctx, loopID)
	if err != nil {
		return err
	}
	if rate.Tick != final.Version {
		r.Fail("RATE tick %d != STATE version %d", rate.Tick, final.Version)
	}
	return nil
}

func (r *run) setMode(mode, manualRate string) error {
	expr, values := `SET #m = :m`, fmt.Sprintf(`{":m": {"S": %q}}`, mode)
	if manualRate != "" {
		expr += `, manual_rate = :r`
		values = fmt.Sprintf(`{":m": {"S": %q}, ":r": {"N": %q}}`, mode, manualRate)
	}
	return r.awsUpdate(expr, values, "--expression-attribute-names", `{"#m": "mode"}`)
}

func (r *run) modes() error {
	ctx := r.Ctx
	before, err := r.store.ReadRate(ctx, loopID)
	if err != nil {
		return err
	}
	if err := r.setMode("shadow", ""); err != nil {
		return err
	}
	st, after, err := r.tick()
	if err != nil {
		return err
	}
	r.Res.ShadowLeftRate = st.Mode == loop.ModeShadow && st.Version == before.Tick+1 && after.Tick == before.Tick
	if !r.Res.ShadowLeftRate {
		r.Fail("shadow: STATE mode %s version %d, RATE tick %d -> %d; want RATE left at its tick", st.Mode, st.Version, before.Tick, after.Tick)
	}
	if err := r.setMode("manual", "250"); err != nil {
		return err
	}
	_, manual, err := r.tick()
	if err != nil {
		return err
	}
	r.Res.ManualRateApplied = manual.PerSecond == 250
	if !r.Res.ManualRateApplied {
		r.Fail("manual: RATE %v; want 250", manual.PerSecond)
	}
	if err := r.setMode("auto", ""); err != nil {
		return err
	}
	_, auto, err := r.tick()
	if err != nil {
		return err
	}
	// The datapoint has not changed since the manual tick: nothing new to
	// integrate, so a bumpless return keeps the rate where manual left it.
	r.Res.BumplessBackToAuto = math.Abs(auto.PerSecond-250) < 1e-6
	if !r.Res.BumplessBackToAuto {
		r.Fail("back to auto: RATE %v; want 250 (bumpless)", auto.PerSecond)
	}
	r.Logf("modes: shadow left RATE at tick %d, manual 250, back to auto at %.3f", after.Tick, auto.PerSecond)
	// The manual rate is no longer needed (the invalid edits switch to
	// manual without one).
	return r.awsUpdate(`REMOVE manual_rate`, "")
}

func (r *run) stale() error {
	if err := r.awsUpdate(`SET stale_after = :a, stale_policy = :p`, `{":a": {"S": "20s"}, ":p": {"S": "fail-closed"}}`); err != nil {
		return err
	}
	st, rate, err := r.tick()
	if err != nil {
		return err
	}
	r.Res.StaleFailedClosed = st.Stale && rate.PerSecond == 10 && rate.Tick == st.Version
	if !r.Res.StaleFailedClosed {
		r.Fail("stale metric (newest datapoint %v old): stale %v, RATE %v; want stale and min_rate 10", time.Since(st.MetricAt), st.Stale, rate.PerSecond)
	}
	if err := r.publishFresh(60); err != nil {
		return err
	}
	st, rate, err = r.tick()
	if err != nil {
		return err
	}
	r.Res.StaleResumedBumpless = !st.Stale && rate.PerSecond == 10
	if !r.Res.StaleResumedBumpless {
		r.Fail("fresh datapoint after stale: stale %v (metric at %v), RATE %v; want fresh and resumed at 10", st.Stale, st.MetricAt, rate.PerSecond)
	}
	r.Logf("stale metric: fail-closed at 10, resumed at %.1f", rate.PerSecond)
	return r.awsUpdate(`SET stale_after = :a`, `{":a": {"S": "5m"}}`)
}

// publishFresh puts one datapoint now.
func (r *run) publishFresh(value float64) error {
	_, err := r.cw.PutMetricData(r.Ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String("AWS/RDS"), MetricData: []cwtypes.MetricDatum{{
		MetricName: aws.String("CPUUtilization"),
		Dimensions: []cwtypes.Dimension{{Name: aws.String("DBInstanceIdentifier"), Value: aws.String(dbID)}},
		Timestamp:  aws.Time(time.Now().UTC()),
		Value:      aws.Float64(value),
		Unit:       cwtypes.StandardUnitPercent,
	}}})
	if err != nil {
		return fmt.Errorf("PutMetricData: %w", err)
	}
	return nil
}

// awsUpdate edits the PARAMS item with `aws dynamodb update-item`.
func (r *run) awsUpdate(expr, values string, extra ...string) error {
	args := []string{"--endpoint-url", r.moto.Endpoint, "dynamodb", "update-item",
		"--table-name", table,
		"--key", fmt.Sprintf(`{"pk": {"S": %q}, "sk": {"S": "PARAMS"}}`, loopID),
		"--update-expression", expr}
	if values != "" {
		args = append(args, "--expression-attribute-values", values)
	}
	args = append(args, extra...)
	cmd := exec.CommandContext(r.Ctx, "aws", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("aws dynamodb update-item %q: %v: %s", expr, err, out)
	}
	return nil
}

// publishCPU puts CPU datapoints for the last 5 minutes at value.
func (r *run) publishCPU(value float64) error {
	now := time.Now().UTC()
	var data []cwtypes.MetricDatum
	for i := 5; i >= 1; i-- {
		data = append(data, cwtypes.MetricDatum{
			MetricName: aws.String("CPUUtilization"),
			Dimensions: []cwtypes.Dimension{{Name: aws.String("DBInstanceIdentifier"), Value: aws.String(dbID)}},
			Timestamp:  aws.Time(now.Add(-time.Duration(i) * time.Minute)),
			Value:      aws.Float64(value),
			Unit:       cwtypes.StandardUnitPercent,
		})
	}
	_, err := r.cw.PutMetricData(r.Ctx, &cloudwatch.PutMetricDataInput{Namespace: aws.String("AWS/RDS"), MetricData: data})
	if err != nil {
		return fmt.Errorf("PutMetricData: %w", err)
	}
	return nil
}

// invoke ticks through one emulator and records what it applied.
func (r *run) invoke(i int) (invocation.Result, error) {
	body, err := r.ries[i].Invoke(r.Ctx, r.payload)
	if err != nil {
		return invocation.Result{}, err
	}
	var inv invocation.Result
	if err := json.Unmarshal(body, &inv); err != nil {
		return inv, fmt.Errorf("invocation response %s: %w", body, err)
	}
	return inv, nil
}

func (r *run) record(invs ...invocation.Result) (applied int) {
	for _, inv := range invs {
		r.Res.Invocations++
		r.Res.RateWrites += inv.RateWrites
		if v, ok := inv.Applied[loopID]; ok {
			r.winners[v]++
			applied++
		}
	}
	r.Res.Ticks += applied
	return applied
}

// waitDue waits until the loop's next tick is due (tick period 1 s).
func (r *run) waitDue() { time.Sleep(1100 * time.Millisecond) }

func (r *run) tickOnce() error {
	r.waitDue()
	inv, err := r.invoke(0)
	if err != nil {
		return err
	}
	if r.record(inv) != 1 {
		r.Fail("single tick did not apply: %+v", inv)
	}
	return nil
}

// tick runs one tick and reads the loop's STATE and RATE after it.
func (r *run) tick() (loop.State, protocol.Rate, error) {
	if err := r.tickOnce(); err != nil {
		return loop.State{}, protocol.Rate{}, err
	}
	st, err := r.store.ReadState(r.Ctx, loopID)
	if err != nil {
		return st, protocol.Rate{}, err
	}
	rate, err := r.store.ReadRate(r.Ctx, loopID)
	return st, rate, err
}

func (r *run) tickPair() error {
	r.waitDue()
	var wg sync.WaitGroup
	invs := make([]invocation.Result, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			invs[i], errs[i] = r.invoke(i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.Res.ConcurrentPairs++
	applied := r.record(invs...)
	lost := 0
	for _, inv := range invs {
		lost += len(inv.Lost)
	}
	if lost > 0 {
		r.Res.ConcurrentRaces++ // both read the same version; one lost the commit
	}
	r.Logf("concurrent pair: %d applied, %d lost (%v / %v)", applied, lost, invs[0].Outcomes, invs[1].Outcomes)
	if applied != 1 {
		r.Fail("concurrent pair applied the tick %d times; want 1 (%+v / %+v)", applied, invs[0], invs[1])
	}
	return nil
}

// invalidEdit is one refused edit: its update expression and values, the
// attribute the refusal must name, and the update that undoes it.
type invalidEdit struct {
	name, expr, values, field string
}

var invalidEditList = []invalidEdit{
	{"negative kp", `SET kp = :v`, `{":v": {"N": "-1"}}`, "kp"},
	{"negative ki", `SET ki = :v`, `{":v": {"N": "-0.5"}}`, "ki"},
	{"negative kd", `SET kd = :v`, `{":v": {"N": "-3"}}`, "kd"},
	{"non-numeric kp", `SET kp = :v`, `{":v": {"S": "fast"}}`, "kp"},
	{"NaN ki as text", `SET ki = :v`, `{":v": {"S": "NaN"}}`, "ki"},
	{"kp as a boolean", `SET kp = :v`, `{":v": {"BOOL": true}}`, "kp"},
	{"min above max", `SET min_rate = :v`, `{":v": {"N": "5000"}}`, "min_rate"},
	{"negative min", `SET min_rate = :v`, `{":v": {"N": "-10"}}`, "min_rate"},
	{"setpoint zero", `SET setpoint = :v`, `{":v": {"N": "0"}}`, "setpoint"},
	{"setpoint above 100", `SET setpoint = :v`, `{":v": {"N": "120"}}`, "setpoint"},
	{"setpoint as text", `SET setpoint = :v`, `{":v": {"S": "forty"}}`, "setpoint"},
	{"unknown mode", `SET #m = :v`, `{":v": {"S": "turbo"}}`, "mode"},
	{"manual without rate", `SET #m = :v`, `{":v": {"S": "manual"}}`, "manual_rate"},
	{"unknown stale policy", `SET stale_policy = :v`, `{":v": {"S": "panic"}}`, "stale_policy"},
	{"missing setpoint", `REMOVE setpoint`, ``, "setpoint"},
	{"missing kp", `REMOVE kp`, ``, "kp"},
	{"missing max rate", `REMOVE max_rate`, ``, "max_rate"},
	{"bad tick period", `SET tick_period = :v`, `{":v": {"S": "soon"}}`, "tick_period"},
	{"tick period as a number", `SET tick_period = :v`, `{":v": {"N": "60"}}`, "tick_period"},
	{"unknown metric source", `SET metric_source = :v`, `{":v": {"S": "graphite"}}`, "metric_source"},
	{"dimensions as a string", `SET metric_dimensions = :v`, `{":v": {"S": "e2e-db"}}`, "metric_dimensions"},
	{"enabled as text", `SET enabled = :v`, `{":v": {"S": "yes"}}`, "enabled"},
	{"unknown anti-windup", `SET anti_windup = :v`, `{":v": {"S": "magic"}}`, "anti_windup"},
	{"misspelt attribute", `SET kpp = :v`, `{":v": {"N": "1"}}`, "kpp"},
	{"setpoint as null", `SET setpoint = :v`, `{":v": {"NULL": true}}`, "setpoint"},
}

// invalidEdits applies each invalid edit with the aws CLI (undoing the
// previous one in the same update), ticks, and checks that the controller
// refused it with a reason that names the attribute, kept the last valid
// parameters in force and kept writing RATE.
func (r *run) invalidEdits() error {
	valid, err := r.store.ReadParams(r.Ctx, loopID)
	if err != nil {
		return err
	}
	lastValid, err := loop.DecodeParams(loopID, valid, looptest.Sources())
	if err != nil {
		return fmt.Errorf("params before the invalid edits are not valid: %w", err)
	}
	var undo string                // SET or REMOVE clause restoring the previous edit
	undoValues := map[string]any{} // its values
	for i, e := range invalidEditList {
		expr, values, err := combine(e, undo, undoValues)
		if err != nil {
			return err
		}
		var extra []string
		if strings.Contains(expr, "#m") {
			extra = []string{"--expression-attribute-names", `{"#m": "mode"}`}
		}
		if err := r.awsUpdate(expr, values, extra...); err != nil {
			return fmt.Errorf("invalid edit %q: %w", e.name, err)
		}
		r.Res.InvalidEditsTried++
		raw, err := r.store.ReadParams(r.Ctx, loopID)
		if err != nil {
			return err
		}
		r.waitDue()
		inv, err := r.invoke(i % 2)
		if err != nil {
			return err
		}
		r.record(inv)
		st, err := r.store.ReadStatus(r.Ctx, loopID)
		if err != nil {
			return err
		}
		state, err := r.store.ReadState(r.Ctx, loopID)
		if err != nil {
			return err
		}
		rate, err := r.store.ReadRate(r.Ctx, loopID)
		if err != nil {
			return err
		}
		ok := st.Status == loop.StatusRefused && st.Fingerprint == loop.Fingerprint(raw) &&
			strings.Contains(st.Reason, e.field) && st.InForce != "" &&
			state.Params != nil && state.Params.Setpoint == lastValid.Setpoint && state.Params.Kp == lastValid.Kp &&
			state.Setpoint == lastValid.Setpoint && rate.Tick == state.Version && inv.Refused == 1
		if ok {
			r.Res.InvalidEditsRejected++
		} else {
			r.Fail("invalid edit %q: status %+v, state setpoint %v, rate tick %d vs state %d, refused %d",
				e.name, st, state.Setpoint, rate.Tick, state.Version, inv.Refused)
		}
		r.Logf("invalid edit %2d %-24s refused: %s", i+1, e.name, st.Reason)
		undo, undoValues = restore(e, valid)
	}
	// Undo the last one.
	expr, values, err := combine(invalidEdit{}, undo, undoValues)
	if err != nil {
		return err
	}
	return r.awsUpdate(expr, values)
}

// restore returns the update clause that puts e's attribute back to its
// valid value.
func restore(e invalidEdit, valid map[string]any) (string, map[string]any) {
	attr := e.field
	if e.field == "manual_rate" {
		attr = "mode"
	}
	v, ok := valid[attr]
	if !ok {
		return "REMOVE " + attr, nil
	}
	return fmt.Sprintf("SET %s = :undo", attrRef(attr)), map[string]any{":undo": v}
}

func attrRef(attr string) string {
	if attr == "mode" {
		return "#m"
	}
	return attr
}

// combine merges e's update with the undo clause of the previous edit.
func combine(e invalidEdit, undo string, undoValues map[string]any) (string, string, error) {
	sets, removes := []string{}, []string{}
	add := func(clause string) {
		switch {
		case strings.HasPrefix(clause, "SET "):
			sets = append(sets, strings.TrimPrefix(clause, "SET "))
		case strings.HasPrefix(clause, "REMOVE "):
			removes = append(removes, strings.TrimPrefix(clause, "REMOVE "))
		}
	}
	if undo != "" && !strings.Contains(e.expr, " "+strings.Fields(undo)[1]+" ") && !strings.HasSuffix(e.expr, " "+strings.Fields(undo)[1]) {
		add(undo)
	}
	add(e.expr)
	expr := ""
	if len(sets) > 0 {
		expr = "SET " + strings.Join(sets, ", ")
	}
	if len(removes) > 0 {
		expr = strings.TrimSpace(expr + " REMOVE " + strings.Join(removes, ", "))
	}
	vals := map[string]json.RawMessage{}
	if e.values != "" {
		if err := json.Unmarshal([]byte(e.values), &vals); err != nil {
			return "", "", fmt.Errorf("edit %q values: %w", e.name, err)
		}
	}
	if strings.Contains(expr, ":undo") {
		for k, v := range undoValues {
			av, err := attributeJSON(v)
			if err != nil {
				return "", "", err
			}
			vals[k] = av
		}
	}
	if len(vals) == 0 {
		return expr, "", nil
	}
	b, err := json.Marshal(vals)
	return expr, string(b), err
}

// attributeJSON writes v (as ddbstore reads items) in the aws CLI's
// attribute-value JSON.
func attributeJSON(v any) (json.RawMessage, error) {
	var doc any
	switch x := v.(type) {
	case string:
		doc = map[string]string{"S": x}
	case float64:
		doc = map[string]string{"N": fmt.Sprint(x)}
	case bool:
		doc = map[string]bool{"BOOL": x}
	case map[string]any:
		m := map[string]json.RawMessage{}
		for k, e := range x {
			av, err := attributeJSON(e)
			if err != nil {
				return nil, err
			}
			m[k] = av
		}
		doc = map[string]any{"M": m}
	default:
		return nil, fmt.Errorf("cannot write %T as an attribute value", v)
	}
	return json.Marshal(doc)
}
