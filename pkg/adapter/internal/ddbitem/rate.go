package ddbitem

import (
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

// EncodeRate is the RATE item of r.
func EncodeRate(r protocol.Rate) map[string]types.AttributeValue {
	item := Key(r.Loop, SortRate)
	item["rate"] = Num(r.PerSecond)
	item["written_at"] = Timestamp(r.WrittenAt)
	item["expires_at"] = Timestamp(r.ExpiresAt)
	item["tick"] = Integer(r.Tick)
	item["v"] = Integer(int64(max(r.Version, protocol.Version)))
	if r.LegacyLive > 0 {
		item["legacy_live"] = Integer(int64(r.LegacyLive))
	}
	if len(r.Weights) > 0 {
		m := make(map[string]types.AttributeValue, len(r.Weights))
		for k, v := range r.Weights {
			m[k] = Num(v)
		}
		item["weights"] = &types.AttributeValueMemberM{Value: m}
	}
	if r.Inner != nil {
		m := map[string]types.AttributeValue{
			"tolerance":        Num(r.Inner.Tolerance),
			"reaction_time_ms": Integer(r.Inner.ReactionTime.Milliseconds()),
		}
		if r.Inner.Trip > 0 {
			m["trip"] = Num(r.Inner.Trip)
		}
		if r.Inner.Settle > 0 {
			m["settle_ms"] = Integer(r.Inner.Settle.Milliseconds())
		}
		if r.Inner.Unsettled {
			m["unsettled"] = &types.AttributeValueMemberBOOL{Value: true}
		}
		item["inner"] = &types.AttributeValueMemberM{Value: m}
	}
	return item
}

// DecodeRate reads a RATE item; a required attribute that is missing is an
// error naming it (a RATE without its rate must not read as 0, which pauses
// every consumer).
func DecodeRate(item map[string]types.AttributeValue) (protocol.Rate, error) {
	var r protocol.Rate
	var err error
	if r.Loop, err = GetS(item, "pk"); err != nil {
		return r, err
	}
	if r.PerSecond, err = GetN(item, "rate"); err != nil {
		return r, err
	}
	if r.WrittenAt, err = GetTime(item, "written_at"); err != nil {
		return r, err
	}
	if r.ExpiresAt, err = GetTime(item, "expires_at"); err != nil {
		return r, err
	}
	if _, ok := item["tick"]; ok {
		t, err := GetN(item, "tick")
		if err != nil {
			return r, err
		}
		r.Tick = int64(t)
	}
	rd := NewReader(item)
	r.Version, r.LegacyLive = int(rd.OptN("v", 1)), int(rd.OptN("legacy_live", 0))
	if err := rd.Err(); err != nil {
		return r, err
	}
	if av, ok := item["weights"]; ok {
		m, ok := av.(*types.AttributeValueMemberM)
		if !ok {
			return r, fmt.Errorf("attribute weights: want a map (M), got %s", TypeName(av))
		}
		r.Weights = make(map[string]float64, len(m.Value))
		for k := range m.Value {
			v, err := GetN(m.Value, k)
			if err != nil {
				return r, fmt.Errorf("weights: %w", err)
			}
			r.Weights[k] = v
		}
	}
	inner, err := decodeInner(item)
	r.Inner = inner
	return r, err
}

// decodeInner reads RATE's inner attribute: nil when absent.
func decodeInner(item map[string]types.AttributeValue) (*protocol.InnerSettings, error) {
	av, ok := item["inner"]
	if !ok {
		return nil, nil
	}
	m, ok := av.(*types.AttributeValueMemberM)
	if !ok {
		return nil, fmt.Errorf("attribute inner: want a map (M), got %s", TypeName(av))
	}
	tol, err := GetN(m.Value, "tolerance")
	if err != nil {
		return nil, fmt.Errorf("inner: %w", err)
	}
	ms, err := GetN(m.Value, "reaction_time_ms")
	if err != nil {
		return nil, fmt.Errorf("inner: %w", err)
	}
	rd := NewReader(m.Value)
	settle := rd.OptN("settle_ms", 0)
	trip := rd.OptN("trip", 0)
	unsettled := false
	if av, ok := m.Value["unsettled"]; ok {
		b, ok := av.(*types.AttributeValueMemberBOOL)
		if !ok {
			return nil, fmt.Errorf("inner: attribute unsettled: want a boolean (BOOL), got %s", TypeName(av))
		}
		unsettled = b.Value
	}
	if err := rd.Err(); err != nil {
		return nil, fmt.Errorf("inner: %w", err)
	}
	if math.IsNaN(tol) || tol < 0 || math.IsNaN(trip) || trip < 0 || math.IsNaN(ms) || ms < 0 || math.IsNaN(settle) || settle < 0 {
		return nil, fmt.Errorf("inner: tolerance %v, trip %v, reaction_time_ms %v and settle_ms %v must not be negative", tol, trip, ms, settle)
	}
	return &protocol.InnerSettings{Tolerance: tol, Trip: trip, ReactionTime: time.Duration(ms * float64(time.Millisecond)),
		Settle: time.Duration(settle * float64(time.Millisecond)), Unsettled: unsettled}, nil
}
