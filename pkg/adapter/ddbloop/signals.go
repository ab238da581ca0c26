package ddbloop

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// encodeSignals and decodeSignals keep every loop's signal records:
// `signals` (S, every signal's record as JSON, controller state included,
// the first signal first) and, for a loop with several signals,
// `limiting` (S, the signal that set the rate).
func encodeSignals(item map[string]types.AttributeValue, st loop.State) error {
	if st.Limiting != "" {
		item["limiting"] = ddbitem.Str(st.Limiting)
	}
	if len(st.Signals) == 0 {
		return nil
	}
	return ddbitem.SetJSON(item, "signals", st.Signals)
}

func decodeSignals(item map[string]types.AttributeValue, st *loop.State) error {
	var err error
	if st.Limiting, err = ddbitem.OptS(item, "limiting"); err != nil {
		return err
	}
	return ddbitem.GetJSON(item, "signals", &st.Signals)
}
