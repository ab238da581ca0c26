package fairshare

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestSplitCases(t *testing.T) {
	inf := math.Inf(1)
	tests := []struct {
		name     string
		capacity float64
		claims   []Claim
		want     []float64
	}{
		{"weights 3:2:1, all hungry", 600, []Claim{{Weight: 3, Demand: inf}, {Weight: 2, Demand: inf}, {Weight: 1, Demand: inf}}, []float64{300, 200, 100}},
		{"an idle claim's share goes to the others", 600, []Claim{{Weight: 3, Demand: inf}, {Weight: 2, Demand: 0}, {Weight: 1, Demand: inf}}, []float64{450, 0, 150}},
		{"a demand-limited claim keeps its demand", 600, []Claim{{Weight: 1, Demand: 50}, {Weight: 1, Demand: inf}}, []float64{50, 550}},
		{"the higher class first", 600, []Claim{{Weight: 3, Demand: 400, Priority: 1}, {Weight: 1, Demand: inf}}, []float64{400, 200}},
		{"the lower class starves under a hungry higher one", 600, []Claim{{Weight: 1, Demand: inf, Priority: 1}, {Weight: 5, Demand: inf}}, []float64{600, 0}},
		{"max caps, the rest to the others", 600, []Claim{{Weight: 1, Max: 100, Demand: inf}, {Weight: 1, Demand: inf}}, []float64{100, 500}},
		{"floors first", 100, []Claim{{Weight: 1, Min: 30, Demand: inf, Priority: 1}, {Weight: 1, Min: 20, Demand: inf}}, []float64{80, 20}},
		{"floors above capacity scale down", 50, []Claim{{Weight: 1, Min: 60}, {Weight: 1, Min: 40}}, []float64{30, 20}},
		{"nobody demands: given out up to max by weight", 600, []Claim{{Weight: 2, Demand: 10, Max: 1000}, {Weight: 1, Demand: 0, Max: 1000}}, []float64{400, 200}},
		{"zero capacity", 0, []Claim{{Weight: 1, Demand: inf}}, []float64{0}},
		{"a margin goes again to the hungry", 600, []Claim{{Weight: 1, Demand: 60, Margin: 10}, {Weight: 1, Demand: inf}}, []float64{60, 550}},
		{"a margin goes to the higher class first", 600, []Claim{{Weight: 1, Demand: 120, Margin: 20}, {Weight: 1, Demand: inf}, {Weight: 1, Demand: inf, Priority: -1}}, []float64{120, 500, 0}},
		{"a margin left by a capped share", 100, []Claim{{Weight: 1, Demand: 120, Margin: 20}, {Weight: 1, Demand: inf}}, []float64{50, 50}},
		{"a margin with nobody hungry is not given twice", 600, []Claim{{Weight: 1, Demand: 60, Margin: 10, Max: 100}, {Weight: 1, Demand: 100, Max: 200}}, []float64{100, 200}},
		{"a margin above the demand counts as the demand", 600, []Claim{{Weight: 1, Demand: 10, Margin: 30}, {Weight: 1, Demand: inf}}, []float64{10, 600}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Split(tc.capacity, tc.claims)
			for i := range tc.want {
				if math.Abs(got[i]-tc.want[i]) > 1e-6 {
					t.Fatalf("Split(%v, %+v) = %v; want %v", tc.capacity, tc.claims, got, tc.want)
				}
			}
		})
	}
}

// TestSplitProperties checks random splits: the sum never exceeds the
// capacity and uses all of it that the claims can take; each share is within
// its bounds; within a class the split is weighted max-min fair by demand
// (a claim with less per weight than another is at its demand cap or its
// floor); a lower class gets more than its floor only when every higher
// claim is at its demand cap.
func TestSplitProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 5000 {
		capacity, claims := randomCase(rng)
		shares := Split(capacity, claims)
		checkSplit(t, n, capacity, claims, shares)
	}
}

func randomCase(rng *rand.Rand) (float64, []Claim) {
	claims := make([]Claim, 1+rng.IntN(6))
	for i := range claims {
		c := Claim{Weight: float64(1 + rng.IntN(5)), Priority: rng.IntN(3), Demand: math.Inf(1)}
		if rng.IntN(3) == 0 {
			c.Demand = rng.Float64() * 300
		}
		if rng.IntN(3) == 0 {
			c.Min = rng.Float64() * 30
		}
		if rng.IntN(3) == 0 {
			c.Max = c.Min + 1 + rng.Float64()*400
		}
		if !math.IsInf(c.Demand, 1) && rng.IntN(2) == 0 {
			c.Margin = c.Demand * rng.Float64() / 2
		}
		claims[i] = c
	}
	return rng.Float64() * 1000, claims
}

func checkSplit(t *testing.T, n int, capacity float64, claims []Claim, shares []float64) {
	t.Helper()
	const eps = 1e-6
	var sum, floors, ceilings, margins float64
	for i, c := range claims {
		sum += shares[i]
		margins += max(0, shares[i]-c.use()) // what it is not expected to take
		floors += min(c.Min, c.ceiling())
		ceilings += c.ceiling()
		if shares[i] < -eps || shares[i] > c.ceiling()+eps {
			t.Fatalf("case %d: share %v of %+v outside [0, %v]", n, shares[i], c, c.ceiling())
		}
	}
	if sum-margins > capacity+eps {
		t.Fatalf("case %d: shares %v less their unused margins %v sum to %v > capacity %v", n, shares, margins, sum-margins, capacity)
	}
	if want := min(capacity, ceilings); sum < want-eps*max(1, capacity) {
		t.Fatalf("case %d: shares %v sum to %v; want %v (work-conserving)", n, shares, sum, want)
	}
	if floors >= capacity {
		return
	}
	for i, a := range claims {
		floorA := min(a.Min, a.ceiling())
		atCapA := satisfied(a, floorA, shares[i])
		for j, b := range claims {
			if i == j {
				continue
			}
			floorB := min(b.Min, b.ceiling())
			if b.Priority > a.Priority && shares[i] > floorA+eps && !satisfied(b, floorB, shares[j]) {
				t.Fatalf("case %d: lower-class claim %d has %v above its floor while higher-class %d is below its demand: %v %+v", n, i, shares[i], j, shares, claims)
			}
			if a.Priority == b.Priority && shares[i]/a.Weight < shares[j]/b.Weight-eps && !atCapA && shares[j] > floorB+eps {
				t.Fatalf("case %d: claim %d below %d per weight without being at its cap: %v %+v", n, i, j, shares, claims)
			}
		}
	}
}

// satisfied reports whether share is all that claim c can use: its demand
// cap, or (with a margin) what it is expected to take.
func satisfied(c Claim, floor, share float64) bool {
	const eps = 1e-6
	return share >= c.demandCap(floor)-eps || (c.Margin > 0 && share >= c.use()-eps)
}
