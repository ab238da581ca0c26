// Package fairshare divides one capacity among claimants by weighted max-min
// fairness with strict priority classes and demand caps (water-filling):
// the split of a destination's allowed rate among the queues that feed it.
//
// Each claimant first gets its floor (Min). The rest goes to the highest
// priority class first; within a class, by weight: every claimant of the
// class gets the same amount per unit of weight, except one whose cap (the
// least of Max and Demand) is lower, which keeps its cap, the others sharing
// what it leaves (Bertsekas & Gallager, Data Networks, 2nd ed., section
// 6.5.2, max-min fair flow control, with weights). What the next class is
// left is what the classes above could not take. Capacity that no claimant
// demands is finally given out again in the same order up to Max, so that a
// claimant whose demand grows finds its share already there.
//
// A claimant whose demand holds a margin (Claim.Margin: a headroom above
// what it is expected to take, so that its growth shows) is not expected to
// use that part: what the split gives it above its expected use goes again,
// in the same order, to the claimants without a finite demand. The shares
// less those unused margins never sum to more than the capacity; without
// margins, the shares never do.
package fairshare

import (
	"cmp"
	"math"
	"slices"
)

// Claim is one claimant of the capacity.
type Claim struct {
	// Weight is the claimant's share within its class, > 0.
	Weight float64
	// Priority is the claimant's class: higher classes are served first.
	Priority int
	// Min and Max bound the claimant's share (Max <= 0: no upper bound).
	Min, Max float64
	// Demand is what the claimant can use; +Inf (or NaN) when it can use
	// any amount.
	Demand float64
	// Margin is the part of a finite Demand that the claimant is not
	// expected to take (its headroom over what it took); 0 for none.
	Margin float64
}

// hungry reports whether the claim can use any amount.
func (c Claim) hungry() bool {
	return math.IsNaN(c.Demand) || c.Demand < 0 || math.IsInf(c.Demand, 1)
}

// use is what the claim is expected to take: its demand less its margin
// (+Inf for a hungry claim).
func (c Claim) use() float64 {
	if c.hungry() {
		return math.Inf(1)
	}
	return max(0, c.Demand-max(0, c.Margin))
}

// ceiling is the most the claim may get: Max, or unbounded.
func (c Claim) ceiling() float64 {
	if c.Max <= 0 || math.IsNaN(c.Max) {
		return math.Inf(1)
	}
	return c.Max
}

// demandCap is the most the claim uses: the least of its ceiling and its
// demand, never below its floor.
func (c Claim) demandCap(floor float64) float64 {
	d := c.Demand
	if math.IsNaN(d) || d < 0 {
		d = math.Inf(1)
	}
	return max(floor, min(c.ceiling(), d))
}

// Split divides capacity (>= 0) among claims and returns each claim's share,
// in claims' order. A claim with a non-positive weight gets only its floor.
// What a claim with a margin gets above its expected use is split again
// among the hungry claims (Claim.Margin).
func Split(capacity float64, claims []Claim) []float64 {
	shares := split(capacity, claims)
	var unused float64
	hungry := false
	fixed := make([]bool, len(claims))
	for i, c := range claims {
		hungry = hungry || (c.hungry() && c.Weight > 0)
		if c.Margin > 0 && !c.hungry() && shares[i] > c.use() {
			unused += shares[i] - c.use()
			fixed[i] = true
		}
	}
	if !hungry || !(unused > 0) {
		return shares
	}
	// The claims given more than their use keep what they got; the others
	// share the capacity that those margins would have left idle.
	again := make([]Claim, len(claims))
	for i, c := range claims {
		if fixed[i] {
			c.Min, c.Demand, c.Margin = shares[i], shares[i], 0
			c.Max = shares[i] // > its use >= 0: bounded
		}
		again[i] = c
	}
	return split(capacity+unused, again)
}

// split is Split without the margins.
func split(capacity float64, claims []Claim) []float64 {
	shares := make([]float64, len(claims))
	if len(claims) == 0 || !(capacity > 0) || math.IsInf(capacity, 0) {
		return shares
	}
	var floors float64
	for i, c := range claims {
		shares[i] = max(0, min(c.Min, c.ceiling()))
		floors += shares[i]
	}
	if floors >= capacity {
		// The floors alone exceed the capacity: scaled down alike.
		for i := range shares {
			shares[i] *= capacity / floors
		}
		return shares
	}
	rest := capacity - floors
	caps := make([]float64, len(claims))
	for i, c := range claims {
		caps[i] = c.demandCap(shares[i])
	}
	rest = fill(rest, claims, shares, caps)
	if rest > 0 {
		// Nobody demands the rest: given out up to Max, in the same order.
		for i, c := range claims {
			caps[i] = max(shares[i], c.ceiling())
		}
		fill(rest, claims, shares, caps)
	}
	return shares
}

// fill gives rest to the claims above their current shares, class by class
// from the highest, by weight up to caps, and returns what is left.
func fill(rest float64, claims []Claim, shares, caps []float64) float64 {
	order := make([]int, len(claims))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(claims[b].Priority, claims[a].Priority) })
	for start := 0; start < len(order) && rest > 0; {
		end := start
		for end < len(order) && claims[order[end]].Priority == claims[order[start]].Priority {
			end++
		}
		rest = fillClass(rest, order[start:end], claims, shares, caps)
		start = end
	}
	return rest
}

// fillClass water-fills rest over one class: each claim of class gets
// clamp(level x weight, its share so far, its cap), for the highest level
// at which the class takes no more than its shares so far plus rest (found
// by bisection: the class's sum grows with the level); it returns what is
// left.
func fillClass(rest float64, class []int, claims []Claim, shares, caps []float64) float64 {
	var base, room, hi float64
	var live []int
	for _, i := range class {
		if claims[i].Weight > 0 && caps[i] > shares[i] {
			live = append(live, i)
			base += shares[i]
			room += caps[i] - shares[i]
		}
	}
	if len(live) == 0 {
		return rest
	}
	if room <= rest {
		for _, i := range live {
			shares[i] = caps[i]
		}
		return rest - room
	}
	at := func(level float64, i int) float64 { return max(shares[i], min(caps[i], level*claims[i].Weight)) }
	sum := func(level float64) float64 {
		var s float64
		for _, i := range live {
			s += at(level, i)
		}
		return s
	}
	for _, i := range live {
		hi = max(hi, (shares[i]+rest)/claims[i].Weight) // every uncapped claim alone takes rest there
	}
	target, lo := base+rest, 0.0
	for range 200 {
		mid := (lo + hi) / 2
		if mid <= lo || mid >= hi {
			break
		}
		if sum(mid) <= target {
			lo = mid
		} else {
			hi = mid
		}
	}
	for _, i := range live {
		shares[i] = at(lo, i)
	}
	return 0 // what the bisection leaves is within rounding of nothing
}
