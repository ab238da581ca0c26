// Package verdict ends the JSON line an end-to-end command prints last: how
// long the run took, whether it passed, and the failures that say why not.
package verdict

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Verdict is embedded last in a command's result, so that its fields end
// the line.
type Verdict struct {
	Seconds  float64  `json:"seconds"`
	OK       bool     `json:"ok"`
	Failures []string `json:"failures"`
}

// Of is the verdict on a run that began at start and met failures: OK
// without any; the failures are an empty list, never null, in the JSON.
func Of(start time.Time, failures []string) Verdict {
	if failures == nil {
		failures = []string{}
	}
	return Verdict{Seconds: math.Round(time.Since(start).Seconds()*10) / 10, OK: len(failures) == 0, Failures: failures}
}

// Print prints the result line (whose verdict is v) on stdout and returns
// the command's exit code: 0 when v is OK, else 1.
func Print(result any, v Verdict) int {
	fmt.Println(string(line(result)))
	if !v.OK {
		return 1
	}
	return 0
}

// line is result's JSON, or, when it has none (a json.RawMessage that is
// not JSON), a failed verdict that says why.
func line(result any) []byte {
	out, err := json.Marshal(result)
	if err != nil {
		return fmt.Appendf(nil, `{"ok":false,"failures":[%q]}`, err.Error())
	}
	return out
}
