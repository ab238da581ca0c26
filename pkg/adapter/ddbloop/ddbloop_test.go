package ddbloop_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/awsconf"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbloop"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/loop"
	"github.com/sluice-dev/sluice/pkg/loop/storetest"
)

// newStore returns a store on a fresh table in the local AWS endpoint.
func newStore(t *testing.T) *ddbloop.Store {
	t.Helper()
	testenv.AWSEndpoint(t)
	return ddbloop.New(ddbtest.Table(t, "sluice-test"))
}

func TestTickStoreContract(t *testing.T) {
	storetest.TestTickStore(t, func(t *testing.T) storetest.Store { return newStore(t) })
}

// TestLoadLoopsCorruptState: a STATE item that does not decode fails its
// own snapshot only.
func TestLoadLoopsCorruptState(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	for _, id := range []string{"good", "bad"} {
		if err := s.WriteParams(ctx, id, map[string]any{"enabled": true}); err != nil {
			t.Fatal(err)
		}
		if err := s.CommitTick(ctx, loop.Commit{PrevVersion: 0, State: loop.State{Loop: id, Version: 1}}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := awsconf.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = dynamodb.NewFromConfig(cfg).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.Table()),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "bad"}, "sk": &types.AttributeValueMemberS{Value: ddbloop.SortState}},
		UpdateExpression:          aws.String("SET version = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "seven"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := s.LoadLoops(ctx)
	if err != nil {
		t.Fatalf("LoadLoops = %v; want the corrupt item reported in its snapshot", err)
	}
	got := map[string]loop.Snapshot{}
	for _, sn := range snaps {
		got[sn.Loop] = sn
	}
	if sn := got["bad"]; sn.Err == nil || !strings.Contains(sn.Err.Error(), "version") || sn.State != nil {
		t.Errorf("bad loop snapshot = %+v; want Err about version and no State", sn)
	}
	if sn := got["good"]; sn.Err != nil || sn.State == nil || sn.State.Version != 1 {
		t.Errorf("good loop snapshot = %+v; want its STATE at version 1", sn)
	}
}

func TestPeersContract(t *testing.T) {
	storetest.TestPeers(t, func(t *testing.T) storetest.PeerStore { return newStore(t) })
}
