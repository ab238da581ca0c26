package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/internal/demo"
	"github.com/sluice-dev/sluice/internal/sim"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// sharedScenario is the name of the scenario of several queues into one
// database, which `sluice demo` and `sluice lab compare` run with their own
// flags (sharedFlags).
const sharedScenario = "shared"

// isShared reports whether args ask for --scenario shared.
func isShared(args []string) bool {
	for i, a := range args {
		if a == "--scenario="+sharedScenario || a == "-scenario="+sharedScenario ||
			((a == "--scenario" || a == "-scenario") && i+1 < len(args) && args[i+1] == sharedScenario) {
			return true
		}
	}
	return false
}

// membersFlag is the repeatable --member flag:
// NAME:weight=W[,priority=P][,rate=R][,backlog=N][,burst=AT+N][,rate-change=AT+R].
type membersFlag struct {
	members *[]demo.SharedMember
	set     bool
}

func (f *membersFlag) String() string { return "" }

func (f *membersFlag) Set(v string) error {
	if !f.set {
		*f.members, f.set = nil, true
	}
	name, spec, ok := strings.Cut(v, ":")
	if !ok || name == "" {
		return fmt.Errorf("%q: want NAME:weight=W[,priority=P][,rate=R][,backlog=N][,burst=AT+N][,rate-change=AT+R]", v)
	}
	m := demo.SharedMember{Name: name, Weight: 1}
	for _, kv := range strings.Split(spec, ",") {
		k, val, _ := strings.Cut(kv, "=")
		if err := setMemberField(&m, k, val); err != nil {
			return fmt.Errorf("member %s: %s: %w", name, k, err)
		}
	}
	*f.members = append(*f.members, m)
	return nil
}

// setMemberField reads one k=val of a --member spec into m.
func setMemberField(m *demo.SharedMember, k, val string) error {
	at := func() (time.Duration, string, error) {
		a, rest, ok := strings.Cut(val, "+")
		if !ok {
			return 0, "", fmt.Errorf("%q: want AT+VALUE, e.g. 50m+300000", val)
		}
		d, err := time.ParseDuration(a)
		return d, rest, err
	}
	var err error
	switch k {
	case "weight":
		m.Weight, err = strconv.ParseFloat(val, 64)
	case "priority":
		m.Priority, err = strconv.Atoi(val)
	case "rate":
		m.Rate, err = strconv.ParseFloat(val, 64)
	case "backlog":
		m.Backlog, err = strconv.ParseInt(val, 10, 64)
	case "burst":
		d, n, e := at()
		b := sim.Burst{At: d}
		if err = e; err == nil {
			b.N, err = strconv.ParseInt(n, 10, 64)
		}
		m.Bursts = append(m.Bursts, b)
	case "rate-change":
		d, r, e := at()
		c := sim.ProducerChange{At: d}
		if err = e; err == nil {
			c.Rate, err = strconv.ParseFloat(r, 64)
		}
		m.ProducerChanges = append(m.ProducerChanges, c)
	default:
		return fmt.Errorf("unknown; want weight, priority, rate, backlog, burst or rate-change")
	}
	return err
}

// sharedFlags are the flags of a shared run.
type sharedFlags struct {
	members []demo.SharedMember
	changes []demo.WeightChange
	s       sim.Scenario
	asJSON  bool
	histOut string
	depth   bool
}

const sharedHelp = "Several queues into one database (--scenario shared): one destination loop holds the controller,\n" +
	"each queue is a member with its own RATE, and the destination's rate is split by weighted max-min\n" +
	"fair share by demand (priority classes first, then weights). Defaults: orders (weight 3, 500 msg/s),\n" +
	"billing (weight 2, idle, then a burst of 300,000 and 200 msg/s at 50m),\n" +
	"reindex (weight 1, priority -1, a backfill of 5,000,000); the setpoint edited 70 -> 50 at 120m;\n" +
	"orders' weight edited 3 -> 1 at 150m."

func parseShared(name string, args []string, stderr io.Writer) (f sharedFlags, code int, done bool) {
	s, members, changes := demo.SharedScenario()
	f.s, f.members, f.changes = s, members, changes
	fs := newFlagSet(name, name+" --scenario shared [--member SPEC ...] [--weight-change AT=NAME:W] [--json]", sharedHelp)
	fs.SetOutput(stderr)
	fs.String("scenario", sharedScenario, "shared (this help)")
	fs.Var(&membersFlag{members: &f.members}, "member",
		"a queue: NAME:weight=W[,priority=P][,rate=R][,backlog=N][,burst=AT+N][,rate-change=AT+R],\n"+
			"e.g. orders:weight=3,rate=500,backlog=100000 (repeatable; replaces the default members)")
	fs.Func("weight-change", "edit a member's weight during the run: AT=NAME:W, e.g. 150m=orders:1 (repeatable; 'none' for none)", func(v string) error {
		if v == "none" {
			f.changes = nil
			return nil
		}
		a, rest, ok1 := strings.Cut(v, "=")
		n, w, ok2 := strings.Cut(rest, ":")
		d, err1 := time.ParseDuration(a)
		wt, err2 := strconv.ParseFloat(w, 64)
		if !ok1 || !ok2 || err1 != nil || err2 != nil {
			return fmt.Errorf("%q: want AT=NAME:W, e.g. 150m=orders:1", v)
		}
		f.changes = append(f.changes, demo.WeightChange{At: d, Member: n, Weight: wt})
		return nil
	})
	fs.DurationVar(&f.s.Duration, "duration", f.s.Duration, "length of the run")
	fs.Float64Var(&f.s.Setpoint, "setpoint", f.s.Setpoint, "the destination's CPU setpoint at the start, percent")
	fs.Var(newSetpointChangesFlag(&f.s.SetpointChanges), "setpoint-change",
		"edit of the destination's setpoint AT=VALUE, e.g. 120m=50 (repeatable or comma-separated; 'none' for none)")
	fs.BoolVar(&f.asJSON, "json", false, "print the result as JSON")
	fs.BoolVar(&f.depth, "depth", true, "name each member's queue (depth_queue): the split reads the queues' depth at each tick\n(--depth=false: the split reads the consumers' counts alone)")
	fs.StringVar(&f.histOut, "history-out", "", "write the destination's history (one point per tick; the consumed rate is the members' total) to this JSON `file`, for sluice tune --from-history")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return f, 0, true
		}
		return f, 2, true
	}
	if err := checkMembers(f.members, f.changes); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return f, 2, true
	}
	return f, 0, false
}

// checkMembers refuses members that no destination could take: no member,
// a name twice or the destination's, a weight that is not > 0, traffic
// below zero, a weight change of no member.
func checkMembers(ms []demo.SharedMember, changes []demo.WeightChange) error {
	if len(ms) == 0 {
		return fmt.Errorf("--member: at least one member")
	}
	seen := map[string]bool{demo.DestinationID: true}
	for _, m := range ms {
		switch {
		case seen[m.Name]:
			return fmt.Errorf("--member %s: the name is taken (twice, or the destination's %q)", m.Name, demo.DestinationID)
		case !(m.Weight > 0):
			return fmt.Errorf("--member %s: weight %v must be > 0", m.Name, m.Weight)
		case m.Rate < 0 || m.Backlog < 0:
			return fmt.Errorf("--member %s: rate and backlog must not be negative", m.Name)
		}
		seen[m.Name] = true
	}
	for _, c := range changes {
		if !seen[c.Member] || c.Member == demo.DestinationID || !(c.Weight > 0) {
			return fmt.Errorf("--weight-change %v=%s:%v: want a member and a weight > 0", c.At, c.Member, c.Weight)
		}
	}
	return nil
}

// runShared runs the shared layout and the layouts to compare it with.
func (f sharedFlags) runShared(layouts ...demo.SharedLayout) ([]demo.SharedResult, error) {
	rec := newHistoryRecorder(f.s)
	rec.file.Loop = demo.DestinationID
	ctrl, _, err := demo.Tune(f.s)
	if err != nil {
		return nil, err
	}
	params := demo.DefaultParams(f.s, ctrl)
	var out []demo.SharedResult
	for _, l := range layouts {
		cfg := demo.SharedConfig{Scenario: f.s, Params: params, Members: f.members, WeightChanges: f.changes, Layout: l, NoDepth: !f.depth}
		if l == demo.LayoutShared && f.histOut != "" {
			cfg.OnTick = func(t demo.Tick) { rec.record(destinationOnly(t)) }
		}
		res, err := demo.RunShared(context.Background(), cfg)
		if err != nil {
			return nil, fmt.Errorf("%s layout: %w", l, err)
		}
		out = append(out, res)
	}
	if f.histOut != "" {
		if err := rec.write(f.histOut); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// destinationOnly is t with the destination's report alone.
func destinationOnly(t demo.Tick) demo.Tick {
	var keep []loop.Report
	for _, r := range t.Reports {
		if r.Loop == demo.DestinationID {
			keep = append(keep, r)
		}
	}
	t.Reports = keep
	return t
}

// runSharedDemo is `sluice demo --scenario shared`.
func runSharedDemo(args []string, stdout, stderr io.Writer) int {
	f, code, done := parseShared("sluice demo", args, stderr)
	if done {
		return code
	}
	res, err := f.runShared(demo.LayoutShared, demo.LayoutSingle)
	if err != nil {
		return fail(stderr, "sluice demo", err, 1)
	}
	sh, single := res[0], res[1]
	iaeRatio := sh.Metrics.IAE / single.Metrics.IAE
	if f.asJSON {
		writeJSON(stdout, map[string]any{"scenario": sharedScenario, "members": sh.Members,
			"fair_share_error_max": sh.FairShareErrorMax, "seconds_above_sp5": sh.SecondsAboveSP5, "max_cpu": sh.MaxCPU, "lost": sh.Lost,
			"metrics": sh.Metrics, "single_loop_iae": single.Metrics.IAE, "iae_vs_single_loop": iaeRatio})
	} else {
		fmt.Fprintf(stdout, "several queues into one database (%v)\n", f.s.Duration)
		fmt.Fprintf(stdout, "  %-10s %6s %8s %12s %14s %14s\n", "member", "weight", "priority", "mean allowed", "mean processed", "mean fair share")
		for _, m := range sh.Members {
			fmt.Fprintf(stdout, "  %-10s %6g %8d %12.1f %14.1f %14.1f\n", m.Name, m.Weight, m.Priority, m.MeanAllowed, m.MeanProcessed, m.MeanFairShare)
		}
		fmt.Fprintf(stdout, "  fair_share_error_max %.4f, seconds above setpoint+5 after the burst %.0f, max CPU %.1f %%, lost %d\n",
			sh.FairShareErrorMax, sh.SecondsAboveSP5, sh.MaxCPU, sh.Lost)
		fmt.Fprintf(stdout, "  IAE %.0f point-s; one loop carrying the same traffic: %.0f (ratio %.3f)\n", sh.Metrics.IAE, single.Metrics.IAE, iaeRatio)
	}
	if sh.Lost != 0 {
		return 1
	}
	return 0
}

// runSharedCompare is `sluice lab compare --scenario shared`: the shared
// destination beside the naive layout (one loop per queue on the same CPU)
// and one loop carrying the whole traffic.
func runSharedCompare(args []string, stdout, stderr io.Writer) int {
	f, code, done := parseShared("sluice lab compare", args, stderr)
	if done {
		return code
	}
	res, err := f.runShared(demo.LayoutShared, demo.LayoutNaive, demo.LayoutSingle)
	if err != nil {
		return fail(stderr, "sluice lab compare", err, 1)
	}
	if f.asJSON {
		rows := make([]map[string]any, len(res))
		for i, r := range res {
			rows[i] = map[string]any{"layout": r.Layout, "iae": r.Metrics.IAE, "oscillation": r.Oscillation, "max_cpu": r.MaxCPU,
				"seconds_above_sp5": r.Metrics.ViolationSeconds, "lost": r.Lost, "members": r.Members}
		}
		writeJSON(stdout, map[string]any{"scenario": sharedScenario, "results": rows})
		return 0
	}
	fmt.Fprintf(stdout, "  %-8s %12s %12s %8s %14s\n", "layout", "IAE", "oscillation", "max CPU", "s above sp+5")
	for _, r := range res {
		fmt.Fprintf(stdout, "  %-8s %12.0f %12.2f %8.1f %14.0f\n", r.Layout, r.Metrics.IAE, r.Oscillation, r.MaxCPU, r.Metrics.ViolationSeconds)
	}
	fmt.Fprintln(stdout, "  oscillation: total variation of the summed allowed rate per hour over its mean")
	return 0
}
