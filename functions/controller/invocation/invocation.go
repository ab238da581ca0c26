// Package invocation is the controller Lambda's response (functions/controller):
// what one invocation's tick did to the loops, as its invoker reads it. The
// controller's end-to-end run (internal/e2e/controller) decodes the same
// type.
package invocation

// Result is what an invocation returns: counts of each outcome, so that an
// invoker (the e2e test, a person with `aws lambda invoke`) sees what the
// tick did.
type Result struct {
	Loops    int            `json:"loops"`
	Outcomes map[string]int `json:"outcomes"`
	// Applied lists the loops whose tick this invocation applied, with the
	// STATE version written; Lost those another invocation applied first.
	Applied map[string]int64 `json:"applied"`
	Lost    []string         `json:"lost"`
	// RateWrites counts the RATE items written.
	RateWrites int `json:"rate_writes"`
	// Refused counts PARAMS edits refused at this tick.
	Refused int `json:"params_refused"`
	// Problems gives, for each loop that failed, whose PARAMS edit was
	// refused or whose metric could not be read, the reason.
	Problems map[string]string `json:"problems"`
}
