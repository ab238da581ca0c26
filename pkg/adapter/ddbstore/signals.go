package ddbstore

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// encodeSignals and decodeSignals keep the override control's record of a
// loop with several signals: `limiting` (S, the signal that set the rate)
// and `signals` (S, every signal's record as JSON, controller state
// included). A loop with one signal has neither.
func encodeSignals(item map[string]types.AttributeValue, st loop.State) error {
	if st.Limiting != "" {
		item["limiting"] = str(st.Limiting)
	}
	if len(st.Signals) == 0 {
		return nil
	}
	return setJSON(item, "signals", st.Signals)
}

func decodeSignals(item map[string]types.AttributeValue, st *loop.State) error {
	var err error
	if st.Limiting, err = optS(item, "limiting"); err != nil {
		return err
	}
	return getJSON(item, "signals", &st.Signals)
}
