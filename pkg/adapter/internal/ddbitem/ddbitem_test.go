package ddbitem_test

import (
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/pkg/adapter/internal/ddbitem"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 123456789, time.UTC)

func TestRateRoundTrip(t *testing.T) {
	want := protocol.Rate{Loop: "orders", PerSecond: 12.5, WrittenAt: t0, ExpiresAt: t0.Add(time.Minute), Tick: 1 << 40, Version: protocol.Version, LegacyLive: 3,
		Weights: map[string]float64{"a": 0.25, "b": 0.75}}
	got, err := ddbitem.DecodeRate(ddbitem.EncodeRate(want))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeRate(EncodeRate(%+v)) = %+v, %v; want it back", want, got, err)
	}
}

func TestRateRoundTripsItsInnerSettings(t *testing.T) {
	want := protocol.Rate{Loop: "orders", PerSecond: 12.5, WrittenAt: t0, ExpiresAt: t0.Add(time.Minute), Version: protocol.Version,
		Inner: &protocol.InnerSettings{Tolerance: 0.35, ReactionTime: 12500 * time.Millisecond}}
	item := ddbitem.EncodeRate(want)
	got, err := ddbitem.DecodeRate(item)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeRate(EncodeRate(%+v)) = %+v, %v; want it back", want, got, err)
	}
	want.Inner = nil
	if _, ok := ddbitem.EncodeRate(want)["inner"]; ok {
		t.Error("EncodeRate without inner settings wrote the inner attribute; want it omitted")
	}
	delete(item["inner"].(*types.AttributeValueMemberM).Value, "tolerance")
	if _, err := ddbitem.DecodeRate(item); err == nil || !strings.Contains(err.Error(), "tolerance") {
		t.Errorf("DecodeRate(inner without tolerance) error = %v; want one naming it", err)
	}
	want.Inner = &protocol.InnerSettings{Tolerance: 0.2, Trip: 0.08, ReactionTime: time.Second, Unsettled: true}
	item = ddbitem.EncodeRate(want)
	if got, err := ddbitem.DecodeRate(item); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("DecodeRate(EncodeRate(%+v)) = %+v, %v; want it back", want, got, err)
	}
	item["inner"].(*types.AttributeValueMemberM).Value["trip"] = &types.AttributeValueMemberN{Value: "-0.1"}
	if _, err := ddbitem.DecodeRate(item); err == nil || !strings.Contains(err.Error(), "trip") {
		t.Errorf("DecodeRate(inner trip -0.1) error = %v; want one naming it", err)
	}
	item["inner"].(*types.AttributeValueMemberM).Value["trip"] = &types.AttributeValueMemberN{Value: "0.08"}
	item["inner"].(*types.AttributeValueMemberM).Value["unsettled"] = &types.AttributeValueMemberS{Value: "yes"}
	if _, err := ddbitem.DecodeRate(item); err == nil || !strings.Contains(err.Error(), "unsettled") {
		t.Errorf("DecodeRate(inner unsettled a string) error = %v; want one naming it", err)
	}
}

func TestRateWithoutItsRateIsRefused(t *testing.T) {
	item := ddbitem.EncodeRate(protocol.Rate{Loop: "orders", PerSecond: 5, WrittenAt: t0, ExpiresAt: t0})
	delete(item, "rate")
	if _, err := ddbitem.DecodeRate(item); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Errorf("DecodeRate(no rate) error = %v; want one naming the attribute rate", err)
	}
}

func TestReaderReportsEveryBadAttribute(t *testing.T) {
	item := ddbitem.Key("l", "X")
	item["n"] = ddbitem.Str("seven")
	r := ddbitem.NewReader(item)
	_ = r.N("n")
	_ = r.TS("missing")
	if got := r.OptN("absent", math.Pi); got != math.Pi {
		t.Errorf("OptN(absent, pi) = %v; want pi", got)
	}
	err := r.Err()
	if err == nil || !strings.Contains(err.Error(), "attribute n") || !strings.Contains(err.Error(), "attribute missing") {
		t.Errorf("Err() = %v; want both the bad n and the missing time named", err)
	}
}

func TestPeerRoundTrip(t *testing.T) {
	item := ddbitem.Key("orders#i-1", ddbitem.SortPeer)
	item["loop"], item["instance"] = ddbitem.Str("orders"), ddbitem.Str("i-1")
	item["stored"] = ddbitem.Integer(1 << 60)
	item["started_at"], item["reported_at"], item["expires_at"] = ddbitem.Timestamp(t0), ddbitem.Timestamp(t0), ddbitem.Timestamp(t0.Add(time.Minute))
	p, err := ddbitem.DecodePeer(item)
	want := protocol.Peer{Loop: "orders", Instance: "i-1", Stored: 1 << 60, StartedAt: t0, ReportedAt: t0, ExpiresAt: t0.Add(time.Minute)}
	if err != nil || p != want {
		t.Errorf("DecodePeer = %+v, %v; want %+v", p, err, want)
	}
}
