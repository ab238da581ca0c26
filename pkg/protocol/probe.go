package protocol

import (
	"bytes"
	"encoding/json"
)

// ProbeEvent is the payload with which the controller invokes a consumer
// function directly, outside its event source mapping, while it holds the
// mapping off for an outage of the destination: the function checks its
// destination (MySQL: a ping and a trivial query; HTTP: a request whose
// answer is not 5xx or 429) without receiving or touching any message, and
// answers a ProbeAnswer. Its one key, "sluice_probe", is what tells it from
// an event of the mapping (an SQS event has "Records").
type ProbeEvent struct {
	Probe ProbeRequest `json:"sluice_probe"`
}

// ProbeRequest names the loop and the mapping the probe is for.
type ProbeRequest struct {
	Loop    string `json:"loop,omitempty"`
	Mapping string `json:"mapping,omitempty"`
}

// ProbeAnswer is the consumer function's answer to a ProbeEvent: Up when
// the destination answered as a working service; Error says why not.
type ProbeAnswer struct {
	Probe ProbeResult `json:"sluice_probe"`
}

// ProbeResult is the outcome of one probe of the destination.
type ProbeResult struct {
	Up    bool   `json:"up"`
	Error string `json:"error,omitempty"`
}

// IsProbe reports whether payload is a ProbeEvent: a JSON object with the
// key "sluice_probe" holding an object.
func IsProbe(payload []byte) bool {
	var v map[string]json.RawMessage
	if json.Unmarshal(payload, &v) != nil {
		return false
	}
	p, ok := v["sluice_probe"]
	return ok && bytes.HasPrefix(bytes.TrimSpace(p), []byte("{"))
}
