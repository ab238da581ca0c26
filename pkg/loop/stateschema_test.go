package loop_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// A STATE of schema 1 (the compatibility corpus) is upgraded as it is
// read: the next tick writes schema 2, with the parameters in force in the
// PARAMS shape, decoding to the same parameters.
func TestStateSchemaUpgrade(t *testing.T) {
	var st loop.State
	readJSON(t, compatDir+"/one_signal.state.json", &st)
	if st.Schema != 0 || st.Params == nil {
		t.Fatalf("corpus STATE: schema %d, params %v; want schema 1 (0) with params", st.Schema, st.Params)
	}
	var attrs map[string]any
	readJSON(t, compatDir+"/one_signal.params.json", &attrs)
	s := &compatStore{loop: "one_signal", params: attrs, state: &st}
	compatTick(t, s, &compatMapping{}, compatWarmup)
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
