package ddbloop

import (
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// encodePause and decodePause keep STATE's pause: `paused` (BOOL) and
// `paused_since`, absent for a loop that is not paused.
func encodePause(item map[string]types.AttributeValue, st loop.State) {
	if !st.Paused {
		return
	}
	item["paused"] = &types.AttributeValueMemberBOOL{Value: true}
	ddbitem.SetTime(item, "paused_since", st.PausedSince)
}

func decodePause(r *ddbitem.Reader, st *loop.State) {
	st.Paused, st.PausedSince = r.OptBool("paused"), r.OptTS("paused_since")
}
