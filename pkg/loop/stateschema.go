package loop

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/metric"
)

// StateSchema is the schema of the STATE items this controller writes:
//
//   - 1 (recorded as 0, none): the parameters in force (State.Params) are
//     Params' own JSON, with nested feedforward, metric and stale objects
//     and durations in nanoseconds.
//   - 2: the parameters in force are in the PARAMS item's shape (the
//     attributes of paramTable, with the loop id as pk; each metric query,
//     whose attributes are its source's, as metric.Query's JSON under
//     metric_query): one schema for the parameters, wherever they are
//     kept.
//   - 3: every signal has its record in State.Signals, its controller's
//     memory included, the first one (the top-level attributes) first, a
//     loop with one signal as one with several. Schemas 1 and 2 kept the
//     first signal's controller memory at the top level ("controller") and
//     no record for the signal of a one-signal loop: as it is read, that
//     memory moves into the first record (UnmarshalJSON; a store that
//     reads the attribute itself does the same), and upgradeState makes
//     the record of a one-signal loop's signal from the top-level fields.
//   - 4: the reason of the last tick (State.Reason, a code and a
//     sentence). Older schemas have none; nothing else changed, so an
//     older STATE reads as it is, with a zero Reason until the next tick.
//
// An older STATE is upgraded as it is read. A STATE of a newer schema is
// refused (a *StateSchemaError in the loop's report): the controller would
// drop the fields it does not know when it writes the next tick.
const StateSchema = 4

// StateSchemaError is the refusal of a STATE item written by a newer
// controller than this one.
type StateSchemaError struct {
	Loop   string
	Schema int
}

func (e *StateSchemaError) Error() string {
	return fmt.Sprintf("loop %q: STATE has schema %d, newer than this controller's %d: the loop is not ticked, "+
		"so that no field a newer controller keeps is dropped; deploy a controller that knows schema %d (or delete STATE to restart the loop from its PARAMS)",
		e.Loop, e.Schema, StateSchema, e.Schema)
}

// upgradeState brings a STATE item as read to StateSchema, or refuses one
// of a newer schema. The parameters of schema 1 are upgraded when they are
// decoded (Params.UnmarshalJSON); the record of a one-signal loop's signal
// (schema 3) is its top-level fields.
func upgradeState(st *State) error {
	if st.Schema > StateSchema {
		return &StateSchemaError{Loop: st.Loop, Schema: st.Schema}
	}
	if st.Schema < 3 && len(st.Signals) == 0 && st.Version > 0 {
		st.Signals = []SignalState{{}}
	}
	if st.Schema < 3 && len(st.Signals) > 0 && st.Signals[0].Name == "" {
		// A one-signal loop's signal: its record is the top-level fields
		// (and the controller memory moved into it as it was read).
		name, unit := DefaultSignal, "%"
		if st.Params != nil {
			name, unit = st.Params.FirstSignal(), cmp.Or(st.Params.Unit, unit)
		}
		st.Signals[0] = SignalState{Name: name, Controller: st.Signals[0].Controller, MetricAt: st.MetricAt,
			Measured: st.Measured, Setpoint: st.Setpoint, Unit: unit, Terms: st.Terms, Stale: st.Stale, StaleSince: st.StaleSince}
	}
	st.Schema = StateSchema
	return nil
}

// UnmarshalJSON decodes a STATE item's JSON. The first signal's controller
// memory that schemas 1 and 2 kept at the top level ("controller") moves
// into the first signal's record (a record without a name, which
// upgradeState completes, when the loop had one signal).
func (s *State) UnmarshalJSON(b []byte) error {
	type plain State // without this method
	var v struct {
		plain
		Controller *control.State `json:"controller"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = State(v.plain)
	if v.Controller != nil && s.Schema < 3 {
		if len(s.Signals) == 0 {
			s.Signals = []SignalState{{}}
		}
		s.Signals[0].Controller = *v.Controller
	}
	return nil
}

// storedQuery is the attribute under which STATE keeps a signal's metric
// query: the query attributes are the metric sources' (metricparams.go),
// and STATE is read without them, so the query is kept as metric.Query's
// own JSON, beside the attributes of paramTable.
const storedQuery = "metric_query"

// MarshalJSON encodes p in the PARAMS item's shape (the attributes of
// paramTable, with the loop id as pk), each metric query under
// storedQuery: the form STATE keeps the parameters in force in.
func (p Params) MarshalJSON() ([]byte, error) {
	a := p.tableAttrs()
	a["pk"] = p.Loop
	a[storedQuery] = queryJSON(p.Metric)
	if m, ok := a[attrSignals].(map[string]any); ok {
		for _, s := range p.Signals {
			if sa, ok := m[s.Name].(map[string]any); ok {
				sa[storedQuery] = queryJSON(s.Metric)
			}
		}
	}
	return json.Marshal(a)
}

// UnmarshalJSON decodes parameters that MarshalJSON encoded, or Params' own
// JSON of STATE schema 1 (recognised by its loop field). The parameters
// were valid when they were stored: a rule added since does not make them
// unreadable, only an attribute of the wrong type does.
func (p *Params) UnmarshalJSON(b []byte) error {
	var a map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&a); err != nil {
		return fmt.Errorf("parameters in force: %w", err)
	}
	if _, ok := a["loop"]; ok {
		type schema1 Params // without these methods
		return json.Unmarshal(b, (*schema1)(p))
	}
	queries := map[string]metric.Query{}
	if err := takeQuery(a, "", queries); err != nil {
		return err
	}
	if sm, ok := a[attrSignals].(map[string]any); ok {
		for name, v := range sm {
			if m, ok := v.(map[string]any); ok {
				if err := takeQuery(m, name, queries); err != nil {
					return err
				}
			}
		}
	}
	id, _ := a["pk"].(string)
	dec := &decoder{attrs: a, loopID: id}
	q := dec.params()
	if len(dec.errs) > 0 {
		return fmt.Errorf("parameters in force: %w", &ParamsError{Loop: id, Fields: dec.errs})
	}
	q.Metric = queries[""]
	for i := range q.Signals {
		q.Signals[i].Metric = queries[q.Signals[i].Name]
	}
	*p = q
	return nil
}

// queryJSON is metric.Query as STATE keeps it: its maps are written even
// empty, so that a query reads back exactly as it was (a conversion, which
// stops compiling when metric.Query changes).
type queryJSON struct {
	Source     string            `json:"source"`
	Namespace  string            `json:"namespace,omitempty"`
	Metric     string            `json:"metric,omitempty"`
	Dimensions map[string]string `json:"dimensions"`
	Statistic  string            `json:"statistic,omitempty"`
	Period     time.Duration     `json:"period,omitempty"`
	PromQL     string            `json:"promql,omitempty"`
	Spec       map[string]string `json:"spec"`
	Lookback   time.Duration     `json:"-"`
}

// takeQuery moves the metric query stored in attrs (storedQuery) into
// queries[key].
func takeQuery(attrs map[string]any, key string, queries map[string]metric.Query) error {
	raw, ok := attrs[storedQuery]
	if !ok {
		return nil
	}
	delete(attrs, storedQuery)
	b, err := json.Marshal(raw)
	if err == nil {
		var q queryJSON
		if err = json.Unmarshal(b, &q); err == nil {
			queries[key] = metric.Query(q)
			return nil
		}
	}
	return fmt.Errorf("parameters in force: %s of signal %q: %w", storedQuery, key, err)
}
