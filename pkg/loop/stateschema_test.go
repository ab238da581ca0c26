package loop_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// A STATE of schema 1 (the compatibility corpus) is upgraded as it is
// read: the next tick writes the current schema, with the parameters in
// force in the PARAMS shape, decoding to the same parameters, and the
// signal's controller memory in its record (schema 3).
func TestStateSchemaUpgrade(t *testing.T) {
	var st loop.State
	readJSON(t, compatDir+"/one_signal.state.json", &st)
	if st.Schema != 0 || st.Params == nil {
		t.Fatalf("corpus STATE: schema %d, params %v; want schema 1 (0) with params", st.Schema, st.Params)
	}
	var attrs map[string]any
	readJSON(t, compatDir+"/one_signal.params.json", &attrs)
	if len(st.Signals) != 1 || !st.Signals[0].Controller.Init {
		t.Fatalf("corpus STATE read: signals %+v; want one record holding the top-level controller memory", st.Signals)
	}
	s := &compatStore{loop: "one_signal", params: attrs, state: &st}
	rep := compatTick(t, s, &compatMapping{}, compatWarmup)
	if len(rep.Signals) != 1 || rep.Signals[0].Name != loop.DefaultSignal || rep.Signals[0].Rate != rep.Rate {
		t.Fatalf("report's signals = %+v; want the one signal %s asking for the rate %v", rep.Signals, loop.DefaultSignal, rep.Rate)
	}
	if len(s.state.Signals) != 1 || s.state.Signals[0].Name != loop.DefaultSignal || !s.state.Signals[0].Controller.Init {
		t.Fatalf("STATE's signals = %+v; want the one signal's record with its controller memory", s.state.Signals)
	}
	if s.state.Schema != loop.StateSchema {
		t.Fatalf("STATE written with schema %d; want %d", s.state.Schema, loop.StateSchema)
	}
	b, err := json.Marshal(s.state)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Params map[string]any `json:"params"`
	}
	if err := json.Unmarshal(b, &raw); err != nil || raw.Params["noise_band"] != 2.0 || raw.Params["pk"] != "one_signal" {
		t.Fatalf("STATE's params = %v, %v; want the PARAMS shape (noise_band 2, pk one_signal)", raw.Params, err)
	}
	var back loop.State
	if err := json.Unmarshal(b, &back); err != nil || back.Params.NoiseBand != 2 || back.Params.Feedforward == nil {
		t.Fatalf("STATE read back: %+v, %v", back.Params, err)
	}
}

// A STATE written by a newer controller is refused, with the reason in the
// report, and nothing is written for the loop.
func TestStateSchemaNewerRefused(t *testing.T) {
	var st loop.State
	readJSON(t, compatDir+"/one_signal.state.json", &st)
	st.Schema = loop.StateSchema + 1
	var attrs map[string]any
	readJSON(t, compatDir+"/one_signal.params.json", &attrs)
	s := &compatStore{loop: "one_signal", params: attrs, state: &st}
	before := st.Version
	rep := compatTick(t, s, &compatMapping{}, compatWarmup)
	var se *loop.StateSchemaError
	if rep.Outcome != loop.OutcomeError || !errors.As(rep.Err, &se) || se.Schema != loop.StateSchema+1 ||
		!strings.Contains(rep.Err.Error(), "newer than this controller's") {
		t.Fatalf("report = %s, %v; want an error refusing the newer schema", rep.Outcome, rep.Err)
	}
	if s.state.Version != before || s.rate != nil {
		t.Fatalf("STATE version %d (was %d), RATE %v: the refused loop was written", s.state.Version, before, s.rate)
	}
}

// Schemas 1 and 2 kept the first signal's controller memory at the top
// level: read, it is the first record's, and a further signal keeps its own.
func TestStateSchemaControllerMoves(t *testing.T) {
	b := []byte(`{"loop":"l","version":3,"schema":2,"controller":{"init":true,"i":12.5},` +
		`"limiting":"lag","signals":[{"name":"cpu","measured":50},{"name":"lag","controller":{"init":true,"i":7}}]}`)
	var st loop.State
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if len(st.Signals) != 2 || st.Signals[0].Controller.Integral != 12.5 || st.Signals[1].Controller.Integral != 7 {
		t.Fatalf("signals = %+v; want cpu's integrator 12.5 (the top-level one) and lag's 7", st.Signals)
	}
	var cur loop.State // schema 3 has no top-level controller
	if err := json.Unmarshal([]byte(`{"loop":"l","version":3,"schema":3,"controller":{"i":1},"signals":[{"name":"cpu"}]}`), &cur); err != nil {
		t.Fatal(err)
	}
	if cur.Signals[0].Controller.Integral != 0 {
		t.Fatalf("schema 3: signals = %+v; want the top-level controller ignored", cur.Signals)
	}
}
