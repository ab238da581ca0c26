package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluice-dev/sluice/functions/controller/metricsources"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/sluice-dev/sluice/internal/paramsaudit"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// paramsStore is what `sluice params` needs from the table.
type paramsStore interface {
	ReadParams(ctx context.Context, loopID string) (map[string]any, error)
	WriteParamsIf(ctx context.Context, loopID string, attrs map[string]any, read int64) error
	ReadStatus(ctx context.Context, loopID string) (loop.ParamsStatus, error)
	ReadState(ctx context.Context, loopID string) (loop.State, error)
	ReadRate(ctx context.Context, loopID string) (protocol.Rate, error)
}

// paramsEnv lets tests give `sluice params` a store instead of DynamoDB,
// and the editor's identity instead of STS's.
type paramsEnv struct {
	open func(ctx context.Context, table string) (paramsStore, error)
	// who is the identity an edit is recorded under (the caller's ARN).
	who func(ctx context.Context) (string, error)
}

// stsCaller is the identity the AWS configuration signs as, from STS
// GetCallerIdentity (on the local endpoint with AWS_ENDPOINT_URL).
func stsCaller(ctx context.Context) (string, error) {
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return "", err
	}
	return paramsaudit.Caller(ctx, sts.NewFromConfig(cfg))
}

func openDynamoStore(ctx context.Context, table string) (paramsStore, error) {
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		return nil, err
	}
	return ddbloop.New(dynamodb.NewFromConfig(cfg), table), nil
}

func runParams(args []string, stdout, stderr io.Writer) int {
	return paramsEnv{open: openDynamoStore, who: stsCaller}.run(args, stdout, stderr)
}

const paramsUsage = `usage: sluice params <get|set|validate> --loop ID [flags] [name=value ...]

  get       print the loop's PARAMS item, whether it is valid, the
            controller's verdict on the latest edit (PARAMS_STATUS), and
            its STATE and RATE
  set       change attributes of PARAMS (name=value ...; name= removes one),
            check the result with the controller's own validation, and
            write it only when it is valid
  validate  check the stored PARAMS item (or --file FILE, a JSON object of
            attributes) with the controller's validation

The table comes from --table, else SLUICE_TABLE, else "sluice"; the AWS
endpoint and credentials from the usual AWS configuration (AWS_ENDPOINT_URL
for a local endpoint). Exit codes: 0 ok, 1 invalid parameters or a failed
call, 2 bad usage.

Attributes (docs/controller.md has the whole data model):
`

func paramsHelp(w io.Writer) {
	fmt.Fprint(w, paramsUsage)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range loop.ParamsAttributes(metricsources.All()) {
		fmt.Fprintf(tw, "  %s\t%s\n", a.Name, a.Help())
	}
	tw.Flush()
}

func (e paramsEnv) run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		if len(args) == 0 {
			paramsHelp(stderr)
			return 2
		}
		paramsHelp(stdout)
		return 0
	}
	sub := args[0]
	fs := flag.NewFlagSet("sluice params "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	loopID := fs.String("loop", "", "loop id (the items' partition key)")
	table := fs.String("table", ddbstore.TableFromEnv(), "DynamoDB table (default: SLUICE_TABLE or sluice)")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	file := fs.String("file", "", "validate: a JSON file of attributes instead of the stored item")
	fs.Usage = func() { paramsHelp(stderr) }
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *loopID == "" && !(sub == "validate" && *file != "") {
		fmt.Fprintf(stderr, "sluice params %s: --loop is required\n", sub)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if sub == "validate" && *file != "" {
		return validateFile(*file, *loopID, *asJSON, stdout, stderr)
	}
	edits, code, done := paramsEdits(sub, fs.Args(), stderr)
	if done {
		return code
	}
	store, err := e.open(ctx, *table)
	if err != nil {
		fmt.Fprintf(stderr, "sluice params %s: %v\n", sub, err)
		return 1
	}
	switch sub {
	case "get":
		return paramsGet(ctx, store, *loopID, *asJSON, stdout, stderr)
	case "set":
		who, err := e.who(ctx)
		if err != nil {
			return fail(stderr, "sluice params set", err, 1)
		}
		return paramsSet(ctx, store, *loopID, edits, audit{who: who, at: time.Now()}, *asJSON, stdout, stderr)
	default:
		attrs, err := store.ReadParams(ctx, *loopID)
		if err != nil {
			return fail(stderr, "sluice params validate", err, 1)
		}
		return report(validateIn(ctx, store, *loopID, attrs), *asJSON, stdout)
	}
}

// paramsEdits checks subcommand sub (get, set, validate) and its
// arguments args: the edits of set (at least one), none for get and
// validate. done says the command ends with code 2, told on stderr.
func paramsEdits(sub string, args []string, stderr io.Writer) (edits []edit, code int, done bool) {
	switch sub {
	case "get", "set", "validate":
	default:
		fmt.Fprintf(stderr, "sluice params: unknown subcommand %q (get, set, validate)\n", sub)
		return nil, 2, true
	}
	edits, err := parseEdits(args)
	if err != nil {
		fmt.Fprintf(stderr, "sluice params %s: %v\n", sub, err)
		return nil, 2, true
	}
	if sub != "set" && len(edits) > 0 {
		fmt.Fprintf(stderr, "sluice params %s: unexpected arguments %q\n", sub, args)
		return nil, 2, true
	}
	if sub == "set" && len(edits) == 0 {
		fmt.Fprintln(stderr, "sluice params set: nothing to set (give name=value ...)")
		return nil, 2, true
	}
	return edits, 0, false
}

// edit is one name=value argument; remove is true for name=.
type edit struct {
	name   string
	value  any
	remove bool
}

func parseEdits(args []string) ([]edit, error) {
	var out []edit
	for _, a := range args {
		name, text, ok := strings.Cut(a, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("argument %q: want name=value", a)
		}
		if text == "" {
			out = append(out, edit{name: name, remove: true})
			continue
		}
		v, err := loop.ParseParamValue(metricsources.All(), name, text)
		if err != nil {
			return nil, err
		}
		out = append(out, edit{name: name, value: v})
	}
	return out, nil
}

// validity is the JSON of a validation.
type validity struct {
	Loop    string            `json:"loop"`
	Valid   bool              `json:"valid"`
	Reasons []loop.FieldError `json:"reasons,omitempty"`
	Params  *loop.Params      `json:"params,omitempty"`
}

func validate(loopID string, attrs map[string]any) validity {
	p, err := loop.DecodeParams(loopID, attrs, metricsources.All())
	if err == nil {
		return validity{Loop: loopID, Valid: true, Params: &p}
	}
	v := validity{Loop: loopID}
	var pe *loop.ParamsError
	if errors.As(err, &pe) {
		v.Reasons = pe.Fields
	} else {
		v.Reasons = []loop.FieldError{{Field: "PARAMS", Reason: err.Error()}}
	}
	return v
}

func report(v validity, asJSON bool, stdout io.Writer) int {
	if asJSON {
		writeJSON(stdout, v)
	} else {
		printValidity(stdout, v)
	}
	if !v.Valid {
		return 1
	}
	return 0
}

func printValidity(w io.Writer, v validity) {
	if v.Valid {
		fmt.Fprintf(w, "PARAMS of loop %q: valid\n", v.Loop)
		return
	}
	fmt.Fprintf(w, "PARAMS of loop %q: INVALID\n", v.Loop)
	for _, r := range v.Reasons {
		fmt.Fprintf(w, "  %s: %s\n", r.Field, r.Reason)
	}
}

func validateFile(path, loopID string, asJSON bool, stdout, stderr io.Writer) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return fail(stderr, "sluice params validate", err, 2)
	}
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	var attrs map[string]any
	if err := dec.Decode(&attrs); err != nil {
		fmt.Fprintf(stderr, "sluice params validate: %s is not a JSON object: %v\n", path, err)
		return 2
	}
	if item, ok := fromDynamoJSON(attrs); ok {
		attrs = item
	}
	if loopID == "" {
		loopID = "file"
		if pk, ok := attrs["pk"].(string); ok && pk != "" {
			loopID = pk
		}
	}
	return report(validate(loopID, attrs), asJSON, stdout) // the item alone: a member's destination is checked against the table by validate --loop
}

// fromDynamoJSON converts an item in DynamoDB JSON ({"kp": {"N": "1"}}, as
// `aws dynamodb put-item --item file://...` takes) to plain values; ok is
// false when item is not in that form.
func fromDynamoJSON(item map[string]any) (map[string]any, bool) {
	if len(item) == 0 {
		return nil, false
	}
	out := make(map[string]any, len(item))
	for k, v := range item {
		pv, ok := dynamoValue(v)
		if !ok {
			return nil, false
		}
		out[k] = pv
	}
	return out, true
}

func dynamoValue(v any) (any, bool) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return nil, false
	}
	for typ, x := range m {
		switch typ {
		case "S":
			s, ok := x.(string)
			return s, ok
		case "N":
			var text string
			switch n := x.(type) {
			case string:
				text = n
			case json.Number:
				text = n.String()
			default:
				return nil, false
			}
			return json.Number(text), true
		case "BOOL":
			b, ok := x.(bool)
			return b, ok
		case "NULL":
			return nil, true
		case "M":
			inner, ok := x.(map[string]any)
			if !ok {
				return nil, false
			}
			if len(inner) == 0 {
				return map[string]any{}, true
			}
			return fromDynamoJSON(inner)
		case "L":
			l, ok := x.([]any)
			if !ok {
				return nil, false
			}
			out := make([]any, len(l))
			for i, e := range l {
				if out[i], ok = dynamoValue(e); !ok {
					return nil, false
				}
			}
			return out, true
		}
	}
	return nil, false
}

// audit is who makes an edit, and when.
type audit struct {
	who string
	at  time.Time
}

func paramsSet(ctx context.Context, store paramsStore, loopID string, edits []edit, by audit, asJSON bool, stdout, stderr io.Writer) int {
	attrs, err := store.ReadParams(ctx, loopID)
	if errors.Is(err, protocol.ErrNotFound) {
		attrs = map[string]any{}
	} else if err != nil {
		return fail(stderr, "sluice params set", err, 1)
	}
	next := maps.Clone(attrs)
	for _, e := range edits {
		if e.remove {
			delete(next, e.name)
		} else {
			next[e.name] = e.value
		}
	}
	v := validateIn(ctx, store, loopID, next)
	if !v.Valid {
		if asJSON {
			writeJSON(stdout, v)
		} else {
			printValidity(stdout, v)
			fmt.Fprintln(stdout, "nothing written: the stored PARAMS are unchanged")
		}
		return 1
	}
	// Who, when and what, in the item and in the log (stderr).
	changes := paramsaudit.Stamp(attrs, next, by.who, by.at)
	// Conditional on the edit version read: an edit written meanwhile (by
	// another operator, the dashboard) is reported, never overwritten.
	if err := store.WriteParamsIf(ctx, loopID, next, loop.ParamsVersion(attrs)); err != nil {
		if errors.Is(err, loop.ErrParamsConflict) {
			fmt.Fprintf(stderr, "sluice params set: conflict: the PARAMS of loop %q changed since they were read; nothing written: check them (sluice params get) and set again\n", loopID)
			return 3
		}
		return fail(stderr, "sluice params set", err, 1)
	}
	paramsaudit.Log(slog.New(slog.NewTextHandler(stderr, nil)), loopID, by.who, by.at, changes)
	if asJSON {
		writeJSON(stdout, v)
	} else {
		fmt.Fprintf(stdout, "PARAMS of loop %q written by %s; the controller applies them at its next tick\n", loopID, by.who)
	}
	return 0
}

// getOutput is the JSON of `sluice params get`.
type getOutput struct {
	Loop     string             `json:"loop"`
	Params   map[string]any     `json:"params"`
	Validity validity           `json:"validity"`
	Status   *loop.ParamsStatus `json:"status,omitempty"`
	State    *stateSummary      `json:"state,omitempty"`
	Rate     *protocol.Rate     `json:"rate,omitempty"`
}

type stateSummary struct {
	Version  int64     `json:"version"`
	TickAt   time.Time `json:"tick_at"`
	Mode     loop.Mode `json:"mode"`
	Setpoint float64   `json:"setpoint"`
	Measured *float64  `json:"measured,omitempty"`
	MetricAt time.Time `json:"metric_at,omitzero"`
	Rate     float64   `json:"rate"`
	Stale    bool      `json:"stale"`
	P        float64   `json:"p"`
	I        float64   `json:"i"`
	FF       float64   `json:"ff"`
	// Reason is what set the rate at the last tick, with the drain
	// forecast when it matters (loop.Reason; zero before STATE schema 4).
	Reason loop.Reason `json:"reason,omitzero"`
	// OldestAge and ExpiresIn are the age of the oldest message in the
	// loop's depth_queue and the time until it expires (depth_retention),
	// as the last tick read them; left out when unknown.
	OldestAge time.Duration `json:"oldest_age,omitempty"`
	ExpiresIn time.Duration `json:"expires_in,omitempty"`
}

// ifExists turns the result of reading an item into a pointer to it, nil
// when the item does not exist (protocol.ErrNotFound), or the read's error.
func ifExists[T any](v T, err error) (*T, error) {
	switch {
	case err == nil:
		return &v, nil
	case errors.Is(err, protocol.ErrNotFound):
		return nil, nil
	}
	return nil, err
}

// paramsGet is `sluice params get`: the loop's PARAMS, their validity,
// and the controller's PARAMS_STATUS, STATE and RATE when they exist.
func paramsGet(ctx context.Context, store paramsStore, loopID string, asJSON bool, stdout, stderr io.Writer) int {
	out, err := readGet(ctx, store, loopID)
	if err != nil {
		return fail(stderr, "sluice params get", err, 1)
	}
	if asJSON {
		writeJSON(stdout, out)
		return 0
	}
	printGet(stdout, out)
	return 0
}

// readGet reads what `sluice params get` prints.
func readGet(ctx context.Context, store paramsStore, loopID string) (getOutput, error) {
	attrs, err := store.ReadParams(ctx, loopID)
	if err != nil {
		return getOutput{}, err
	}
	out := getOutput{Loop: loopID, Params: attrs, Validity: validateIn(ctx, store, loopID, attrs)}
	out.Validity.Params = nil
	if out.Status, err = ifExists(store.ReadStatus(ctx, loopID)); err != nil {
		return getOutput{}, err
	}
	st, err := ifExists(store.ReadState(ctx, loopID))
	if err != nil {
		return getOutput{}, err
	}
	if st != nil {
		s := stateSummary{Version: st.Version, TickAt: st.TickAt, Mode: st.Mode, Setpoint: st.Setpoint, MetricAt: st.MetricAt,
			Rate: st.Rate, Stale: st.Stale, P: st.Terms.P, I: st.Terms.I, FF: st.Terms.FF, Reason: st.Reason,
			OldestAge: st.OldestAge, ExpiresIn: st.ExpiresIn}
		// No datapoint yet: STATE has no metric_at (its measured is a
		// zero value, not a measurement).
		if !math.IsNaN(st.Measured) && !st.MetricAt.IsZero() {
			m := st.Measured
			s.Measured = &m
		}
		out.State = &s
	}
	if out.Rate, err = ifExists(store.ReadRate(ctx, loopID)); err != nil {
		return getOutput{}, err
	}
	return out, nil
}

// printGet prints out as text.
func printGet(w io.Writer, out getOutput) {
	fmt.Fprintf(w, "loop %s\n\nPARAMS\n", out.Loop)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, k := range slices.Sorted(maps.Keys(out.Params)) {
		b, _ := json.Marshal(out.Params[k])
		fmt.Fprintf(tw, "  %s\t%s\n", k, b)
	}
	tw.Flush()
	fmt.Fprintln(w)
	printValidity(w, out.Validity)
	fmt.Fprintln(w)
	if s := out.Status; s != nil {
		fmt.Fprintf(w, "PARAMS_STATUS (controller's verdict on the latest edit, tick %d at %s): %s\n", s.Tick, s.CheckedAt.Format(time.RFC3339), strings.ToUpper(s.Status))
		if s.Reason != "" {
			fmt.Fprintf(w, "  reason: %s\n", s.Reason)
		}
		if s.InForce != "" {
			fmt.Fprintf(w, "  in force: %s\n", s.InForce)
		}
	} else {
		fmt.Fprintln(w, "PARAMS_STATUS: none yet (the controller has not ticked this loop)")
	}
	if s := out.State; s != nil {
		measured := "no datapoint yet"
		if s.Measured != nil {
			measured = fmt.Sprintf("%.2f %% at %s", *s.Measured, s.MetricAt.Format(time.RFC3339))
		}
		fmt.Fprintf(w, "STATE: tick %d at %s, mode %s, setpoint %.2f %%, measured %s, rate %.2f msg/s (P %.2f, I %.2f, FF %.2f), stale %v\n",
			s.Version, s.TickAt.Format(time.RFC3339), s.Mode, s.Setpoint, measured, s.Rate, s.P, s.I, s.FF, s.Stale)
		if s.Reason.Code != "" {
			fmt.Fprintf(w, "  reason: %s (sluice why --loop %s: the last ticks')\n", s.Reason.Text, out.Loop)
		}
	}
	if r := out.Rate; r != nil {
		state := "valid"
		if r.Expired(time.Now()) {
			state = "EXPIRED: consumers use their safe rate"
		}
		fmt.Fprintf(w, "RATE: %.2f msg/s, tick %d, written %s, expires %s (%s)\n", r.PerSecond, r.Tick,
			r.WrittenAt.Format(time.RFC3339), r.ExpiresAt.Format(time.RFC3339), state)
	}
}

func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
