package ddbloop

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// encodeExperiment keeps STATE's guarded experiment (loop.ExperimentState)
// as JSON text in the attribute experiment (decodeState reads it back).
func encodeExperiment(item map[string]types.AttributeValue, st loop.State) error {
	if st.Experiment == nil {
		return nil
	}
	return ddbitem.SetJSON(item, "experiment", st.Experiment)
}
