package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/pkg/protocol"
)

var t0 = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func TestRateExpired(t *testing.T) {
	for _, tc := range []struct {
		name    string
		expires time.Time
		now     time.Time
		want    bool
	}{
		{"before the expiry", t0, t0.Add(-time.Nanosecond), false},
		{"at the expiry", t0, t0, true},
		{"after the expiry", t0, t0.Add(time.Second), true},
		{"no expiry never expires", time.Time{}, t0.Add(1000 * time.Hour), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := protocol.Rate{Loop: "l", PerSecond: 1, ExpiresAt: tc.expires}
			if got := r.Expired(tc.now); got != tc.want {
				t.Errorf("Rate{ExpiresAt: %v}.Expired(%v) = %v; want %v", tc.expires, tc.now, got, tc.want)
			}
		})
	}
}

func TestPeerLiveAndLivePeers(t *testing.T) {
	peers := []protocol.Peer{
		{Instance: "a", ExpiresAt: t0.Add(time.Second)},
		{Instance: "b", ExpiresAt: t0},                   // lapses at t0
		{Instance: "c", ExpiresAt: t0.Add(-time.Minute)}, // lapsed
		{Instance: "d", ExpiresAt: t0.Add(time.Hour)},
	}
	if got := protocol.LivePeers(peers, t0); got != 2 {
		t.Errorf("LivePeers(a, b, c, d at t0) = %d; want 2 (a and d)", got)
	}
	if got := protocol.LivePeers(nil, t0); got != 0 {
		t.Errorf("LivePeers(nil) = %d; want 0", got)
	}
	if peers[1].Live(t0) {
		t.Errorf("Peer{ExpiresAt: t0}.Live(t0) = true; want false (a lease lapses at its expiry)")
	}
}

func TestPeerBatchCount(t *testing.T) {
	p := protocol.Peer{Batches: 3, BatchMessages: 25, Working: 1500 * time.Millisecond}
	want := protocol.BatchCount{Batches: 3, Messages: 25, Working: 1500 * time.Millisecond}
	if got := p.BatchCount(); got != want {
		t.Errorf("BatchCount() = %+v; want %+v", got, want)
	}
}

// The JSON names are the contract between releases: they never change.
func TestJSONNamesAreStable(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want []string
	}{
		{protocol.Rate{Weights: map[string]float64{"n": 1}, Version: 2, LegacyLive: 1, Inner: &protocol.InnerSettings{}}, []string{"loop", "rate", "written_at", "expires_at", "tick", "weights", "v", "legacy_live", "inner"}},
		{protocol.InnerSettings{}, []string{"tolerance", "reaction_time"}},
		{protocol.Peer{Batches: 1, BatchMessages: 1, Working: 1}, []string{"loop", "instance", "stored", "batches", "batch_messages", "working", "started_at", "reported_at", "expires_at"}},
		{protocol.BatchCount{}, []string{"batches", "messages", "working"}},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range tc.want {
			if _, ok := m[k]; !ok {
				t.Errorf("%T as JSON = %s; want the field %q", tc.v, b, k)
			}
		}
		if len(m) != len(tc.want) {
			t.Errorf("%T as JSON has %d fields (%s); want %d", tc.v, len(m), b, len(tc.want))
		}
	}
}

func TestRateRoundTripsThroughJSON(t *testing.T) {
	want := protocol.Rate{Loop: "l", PerSecond: 12.5, WrittenAt: t0, ExpiresAt: t0.Add(time.Minute), Tick: 7, Weights: map[string]float64{"a": 0.25, "b": 0.75}}
	b, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var got protocol.Rate
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Rate through JSON = %+v; want %+v", got, want)
	}
}

func TestErrNotFoundWrapped(t *testing.T) {
	err := fmt.Errorf("read RATE loop %q: %w", "l", protocol.ErrNotFound)
	if !errors.Is(err, protocol.ErrNotFound) {
		t.Errorf("errors.Is(%v, ErrNotFound) = false; want true", err)
	}
}

// A consumer keeps to the layout both it and the controller know: layout
// 1 for a RATE without a version, the newest it knows for a later one.
func TestRateLeaseLayout(t *testing.T) {
	for v, want := range map[int]int{0: 1, 1: 1, 2: 2, 99: protocol.LatestLayout} {
		if got := (protocol.Rate{Version: v}).LeaseLayout(); got != want {
			t.Errorf("Rate{Version: %d}.LeaseLayout() = %d; want %d", v, got, want)
		}
	}
}

// An instance that stops without closing its lease (a Lambda environment
// frozen or reaped) leaves the live count no later than its lease would
// lapse: whenever in a bucket its last refresh came, the counts of the
// bucket a lease TTL later and of the one before it no longer hold it, so
// that the survivors of a scale-down take their share within the TTL.
func TestLiveCountForgetsAStoppedInstanceWithinTheLeaseTTL(t *testing.T) {
	const leaseTTL = 15 * time.Second // pkg/consume's DefaultLeaseTTL
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for off := time.Duration(0); off < 2*protocol.LiveBucket; off += 100 * time.Millisecond {
		last := start.Add(off)
		if at := last.Add(leaseTTL); protocol.BucketOf(at)-1 <= protocol.BucketOf(last) {
			t.Fatalf("a last refresh at %v is still in the counts read at %v (buckets %d and %d); want it gone within the %v lease TTL",
				last.Format("15:04:05.0"), at.Format("15:04:05.0"), protocol.BucketOf(at)-1, protocol.BucketOf(at), leaseTTL)
		}
	}
}

func TestLiveCount(t *testing.T) {
	// 2026-01-01T00:00:00Z is a whole number of LiveBuckets since the epoch.
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(protocol.LiveBucket - time.Second)
	if protocol.BucketOf(at) != protocol.BucketOf(at.Add(-(protocol.LiveBucket-time.Second))) || protocol.BucketOf(at.Add(time.Second)) != protocol.BucketOf(at)+1 {
		t.Errorf("BucketOf: want buckets of %v aligned on the epoch", protocol.LiveBucket)
	}
	for _, tc := range []struct {
		prev, cur int64
		legacy    int
		want      int
	}{{3, 5, 0, 5}, {5, 3, 0, 5}, {0, 0, 2, 2}, {-1, -2, 0, 0}, {4, 4, 1, 5}} {
		if got := protocol.LiveCount(tc.prev, tc.cur, tc.legacy); got != tc.want {
			t.Errorf("LiveCount(%d, %d, %d) = %d; want %d", tc.prev, tc.cur, tc.legacy, got, tc.want)
		}
	}
}
