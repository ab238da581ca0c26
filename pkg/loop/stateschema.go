package loop

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// StateSchema is the schema of the STATE items this controller writes:
//
//   - 1 (recorded as 0, none): the parameters in force (State.Params) are
//     Params' own JSON, with nested feedforward, metric and stale objects
//     and durations in nanoseconds.
//   - 2: the parameters in force are in the PARAMS item's shape (the
//     attributes DecodeParams reads, with the loop id as pk): one schema
//     for the parameters, wherever they are kept.
//
// An older STATE is upgraded as it is read. A STATE of a newer schema is
// refused (a *StateSchemaError in the loop's report): the controller would
// drop the fields it does not know when it writes the next tick.
const StateSchema = 2

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
// decoded (Params.UnmarshalJSON).
func upgradeState(st *State) error {
	if st.Schema > StateSchema {
		return &StateSchemaError{Loop: st.Loop, Schema: st.Schema}
	}
	st.Schema = StateSchema
	return nil
}

// MarshalJSON encodes p in the PARAMS item's shape (Attrs, with the loop id
// as pk): the form STATE keeps the parameters in force in.
func (p Params) MarshalJSON() ([]byte, error) {
	a := p.Attrs()
	a["pk"] = p.Loop
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
	id, _ := a["pk"].(string)
	dec := &decoder{attrs: a, loopID: id}
	q := dec.params()
	if len(dec.errs) > 0 {
		return fmt.Errorf("parameters in force: %w", &ParamsError{Loop: id, Fields: dec.errs})
	}
	*p = q
	return nil
}
