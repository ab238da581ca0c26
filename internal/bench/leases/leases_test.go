package leases

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/sluice-dev/sluice/internal/testenv"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore"
	"github.com/sluice-dev/sluice/pkg/adapter/ddbstore/ddbtest"
	"github.com/sluice-dev/sluice/pkg/consume"
	"github.com/sluice-dev/sluice/pkg/protocol"
)

// scenario is a table of leases: live and lapsed ones spread evenly over
// loops.
type scenario struct {
	Name          string `json:"name"`
	Loops         int    `json:"loops"`
	Live, Lapsed  int    `json:"-"`
	sample        int
	tick, refresh time.Duration
}

// cost is what one consumer costs per second in one layout, in request
// units: its lease writes, its live counts (and the counts' writes, in
// layout 2), and its part of the controller's read of every lease per tick.
type cost struct {
	Layout       int     `json:"layout"`
	WritePerSec  float64 `json:"wcu_per_consumer_s"`
	ReadPerSec   float64 `json:"rcu_per_consumer_s"`
	CountRead    float64 `json:"rcu_per_count"`
	ControllerRU float64 `json:"controller_rcu_per_tick"`
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n >= 0 {
		return n
	}
	return def
}

// TestLeaseCapacity measures both lease layouts on moto: a table of live
// and lapsed leases in one loop, then the same leases over many loops,
// and reports the capacity one consumer consumes per second, computed as
// DynamoDB bills it (Meter). Layout 1's cost grows with the loop's leases,
// lapsed ones included; layout 2's does not. make bench-leases runs it
// with 1,000 live and 10,000 lapsed leases
// (SLUICE_LEASE_BENCH_LIVE, SLUICE_LEASE_BENCH_LAPSED); make test with a
// few.
func TestLeaseCapacity(t *testing.T) {
	testenv.AWSEndpoint(t)
	live, lapsed := envInt("SLUICE_LEASE_BENCH_LIVE", 10), envInt("SLUICE_LEASE_BENCH_LAPSED", 50)
	loops := max(1, live/10)
	var results []map[string]any
	perLayout := map[int][]cost{}
	for _, sc := range []scenario{
		{Name: "one loop", Loops: 1, Live: live, Lapsed: lapsed},
		{Name: "one loop, no lapsed lease", Loops: 1, Live: live},
		{Name: fmt.Sprintf("%d loops", loops), Loops: loops, Live: live, Lapsed: lapsed},
	} {
		sc.sample, sc.tick, sc.refresh = min(sc.Live, 5), time.Minute, consume.DefaultLeaseEvery
		row := map[string]any{"scenario": sc.Name, "loops": sc.Loops, "live": sc.Live, "lapsed": sc.Lapsed}
		for _, layout := range []int{1, 2} {
			c := measure(t, sc, layout)
			row[fmt.Sprintf("layout%d", layout)] = c
			perLayout[layout] = append(perLayout[layout], c)
		}
		results = append(results, row)
	}
	for _, c := range perLayout[2][1:] {
		if c.CountRead != perLayout[2][0].CountRead || c.WritePerSec != perLayout[2][0].WritePerSec {
			t.Errorf("layout 2 consumer cost %+v; want the same as %+v in every scenario (flat in loops and lapsed leases)", c, perLayout[2][0])
		}
	}
	if live > 0 && lapsed > 0 && perLayout[1][0].CountRead <= perLayout[1][1].CountRead {
		t.Errorf("layout 1 count with lapsed leases %v RCU, without %v; want it dearer with them (the query reads them)", perLayout[1][0].CountRead, perLayout[1][1].CountRead)
	}
	b, _ := json.Marshal(map[string]any{"bench": "leases", "live": live, "lapsed": lapsed, "results": results})
	fmt.Println(string(b))
}

// measure seeds a fresh table with sc's leases in layout and measures a
// few consumers' refresh and count, and the controller's read.
func measure(t *testing.T, sc scenario, layout int) cost {
	ctx := context.Background()
	client, table := ddbtest.Table(t, "leasebench")
	now := time.Now().UTC()
	seed(t, client, table, sc, layout, now)
	m := NewMeter(client, 1)
	joined := map[string]int{}
	for i := 0; i < sc.sample; i++ {
		loop, _ := instance(sc, i)
		inst := fmt.Sprintf("sampled-%d", i) // joins the loop's seeded consumers
		joined[loop]++
		store := ddbstore.New(m, table)
		if layout == 2 {
			r := protocol.Rate{Loop: loop, PerSecond: 100, WrittenAt: now, ExpiresAt: now.Add(3 * time.Minute)}
			if err := store.WriteRate(ctx, r); err != nil {
				t.Fatal(err)
			}
			m.Kind("rate")
			if _, err := store.ReadRate(ctx, loop); err != nil {
				t.Fatal(err)
			}
		}
		m.Kind("report")
		p := protocol.Peer{Loop: loop, Instance: inst, Stored: 1000, StartedAt: now.Add(-time.Hour), ReportedAt: now, ExpiresAt: now.Add(consume.DefaultLeaseTTL)}
		if err := store.ReportPeer(ctx, p); err != nil {
			t.Fatal(err)
		}
		m.Kind("count")
		n, err := store.LivePeers(ctx, loop, now)
		if want := sc.Live/sc.Loops + joined[loop]; err != nil || n != want {
			t.Fatalf("layout %d: LivePeers(%s) = %d, %v; want %d", layout, loop, n, err, want)
		}
	}
	m.Kind("controller")
	ctrl := ddbstore.New(m, table)
	if _, err := ctrl.Peers(ctx); err != nil {
		t.Fatal(err)
	}
	if layout == 2 {
		for l := 0; l < sc.Loops; l++ {
			if _, err := ctrl.LoopPeers(ctx, loopID(l)); err != nil {
				t.Fatal(err)
			}
		}
	}
	k := float64(sc.sample)
	put, upd, count := m.UsedBy("report", "PutItem").Write/k, m.UsedBy("report", "UpdateItem").Write/k, m.Used("count").Read/k
	ctrlRU := m.Used("controller").Read
	return cost{Layout: layout,
		// A refresh every DefaultLeaseEvery; a live count's write once per bucket.
		WritePerSec: round(put/sc.refresh.Seconds() + upd/protocol.LiveBucket.Seconds()),
		ReadPerSec:  round(count/sc.refresh.Seconds() + ctrlRU/sc.tick.Seconds()/float64(max(sc.Live, 1))),
		CountRead:   count, ControllerRU: ctrlRU}
}

// round keeps 4 significant digits.
func round(f float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 4, 64), 64)
	return v
}

func loopID(l int) string { return fmt.Sprintf("bench-%03d", l) }

// instance is the i-th live consumer of sc: loop i mod Loops.
func instance(sc scenario, i int) (string, string) {
	return loopID(i % sc.Loops), fmt.Sprintf("%016x", i)
}

// seed writes sc's live and lapsed leases in layout (and, in layout 2,
// each loop's live counts of now's bucket and the previous one).
func seed(t *testing.T, client *dynamodb.Client, table string, sc scenario, layout int, now time.Time) {
	var items []map[string]types.AttributeValue
	for i := 0; i < sc.Live+sc.Lapsed; i++ {
		loop, inst := instance(sc, i)
		p := protocol.Peer{Loop: loop, Instance: inst, Stored: int64(i) * 1000, StartedAt: now.Add(-time.Hour), ReportedAt: now, ExpiresAt: now.Add(consume.DefaultLeaseTTL),
			Batches: int64(i), BatchMessages: int64(i) * 10, Working: time.Duration(i) * time.Second}
		if i >= sc.Live {
			p.ReportedAt, p.ExpiresAt = now.Add(-5*time.Minute), now.Add(-5*time.Minute+consume.DefaultLeaseTTL)
		}
		items = append(items, ddbstore.LeaseItem(p, layout))
	}
	if layout == 2 {
		b := protocol.BucketOf(now)
		for l := 0; l < sc.Loops; l++ {
			for _, bucket := range []int64{b - 1, b} {
				items = append(items, map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: ddbstore.LeasePK(loopID(l))}, "sk": &types.AttributeValueMemberS{Value: ddbstore.LiveSK(loopID(l), bucket)},
					"loop": &types.AttributeValueMemberS{Value: loopID(l)}, "n": &types.AttributeValueMemberN{Value: strconv.Itoa(sc.Live / sc.Loops)}})
			}
		}
	}
	batchWrite(t, client, table, items)
}

func batchWrite(t *testing.T, client *dynamodb.Client, table string, items []map[string]types.AttributeValue) {
	ctx := context.Background()
	for start := 0; start < len(items); start += 25 {
		var reqs []types.WriteRequest
		for _, item := range items[start:min(start+25, len(items))] {
			reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
		}
		in := map[string][]types.WriteRequest{table: reqs}
		for len(in) > 0 {
			out, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: in})
			if err != nil {
				t.Fatalf("seed leases: %v", err)
			}
			in = out.UnprocessedItems
		}
	}
}
