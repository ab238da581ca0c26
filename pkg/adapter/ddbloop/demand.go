package ddbloop

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// encodeMapping and decodeMapping keep STATE's Mapping (the event source
// mapping's concurrency, its last update and error, the consumers' batch
// counts) in the attribute `mapping`, as JSON; absent for a loop that owns
// no mapping.
func encodeMapping(item map[string]types.AttributeValue, m loop.MappingState) error {
	if m.UUID == "" && m.Concurrency == 0 && m.Target == 0 && m.AttemptAt.IsZero() && m.Counts == nil && m.BatchSeconds == 0 {
		return nil
	}
	return ddbitem.SetJSON(item, "mapping", m)
}

func decodeMapping(item map[string]types.AttributeValue, m *loop.MappingState) error {
	return ddbitem.GetJSON(item, "mapping", m)
}

// encodeDemand and decodeDemand keep STATE's Demand (the consumers'
// counts at the last tick) in the attribute `demand`, as JSON.
func encodeDemand(item map[string]types.AttributeValue, d loop.Demand) error {
	if d.Stored == nil && !d.Known && d.Live == 0 {
		return nil
	}
	return ddbitem.SetJSON(item, "demand", d)
}

func decodeDemand(item map[string]types.AttributeValue, d *loop.Demand) error {
	return ddbitem.GetJSON(item, "demand", d)
}
