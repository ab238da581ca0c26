package ddbstore

import (
	"encoding/json"
	"fmt"

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
	b, err := json.Marshal(st.Signals)
	if err != nil {
		return fmt.Errorf("signals: %w", err)
	}
	item["signals"] = str(string(b))
	return nil
}

func decodeSignals(item map[string]types.AttributeValue, st *loop.State) error {
	var err error
	if st.Limiting, err = optS(item, "limiting"); err != nil {
		return err
	}
	s, err := optS(item, "signals")
	if err != nil || s == "" {
		return err
	}
	if err := json.Unmarshal([]byte(s), &st.Signals); err != nil {
		return fmt.Errorf("signals: %w", err)
	}
	return nil
}
