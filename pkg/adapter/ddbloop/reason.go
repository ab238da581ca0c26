package ddbloop

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/loop"
)

// encodeReason writes STATE's last reason (`reason`, JSON: code and text)
// and the queue's forecast (`oldest_age`, `expires_in`, nanoseconds), each
// only when set.
func encodeReason(item map[string]types.AttributeValue, st loop.State) error {
	for name, d := range map[string]time.Duration{"oldest_age": st.OldestAge, "expires_in": st.ExpiresIn} {
		if d != 0 {
			item[name] = ddbitem.Integer(int64(d))
		}
	}
	if st.Reason.Code == "" {
		return nil
	}
	return ddbitem.SetJSON(item, "reason", st.Reason)
}

func decodeReason(r *ddbitem.Reader, st *loop.State) {
	r.OptJSON("reason", &st.Reason)
	st.OldestAge = time.Duration(r.OptN("oldest_age", 0))
	st.ExpiresIn = time.Duration(r.OptN("expires_in", 0))
}
