package ddbstore

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/loop"
)

// encodeExperiment and decodeExperiment keep STATE's guarded experiment
// (loop.ExperimentState) as JSON text in the attribute experiment.
func encodeExperiment(item map[string]types.AttributeValue, st loop.State) error {
	if st.Experiment == nil {
		return nil
	}
	b, err := json.Marshal(st.Experiment)
	if err != nil {
		return fmt.Errorf("experiment state: %w", err)
	}
	item["experiment"] = str(string(b))
	return nil
}

func decodeExperiment(item map[string]types.AttributeValue, st *loop.State) error {
	text, err := optS(item, "experiment")
	if err != nil || text == "" {
		return err
	}
	var x loop.ExperimentState
	if err := json.Unmarshal([]byte(text), &x); err != nil {
		return fmt.Errorf("experiment: %w", err)
	}
	st.Experiment = &x
	return nil
}
