package loop

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
)

// A loop may be a member of a destination: several queues into one
// database. The destination is a loop like any other (its signals and
// controllers, its PARAMS); it has no consumers of its own. Its members name
// it in PARAMS `destination`, with their `weight`, `priority` and own
// `min_rate`/`max_rate`; each has its own RATE item, consumers, leases and
// mapping. At each tick the destination's controllers see the members'
// total processed rate, and the destination's allowed rate is split among
// its members by weighted max-min fair share by demand (share.go).

// Attribute names of a member's PARAMS.
const (
	AttrDestination = "destination"
	AttrWeight      = "weight"
	AttrPriority    = "priority"
)

// DefaultWeight is a member's weight when PARAMS set none.
const DefaultWeight = 1

// Member is a loop's membership of a destination (PARAMS destination,
// weight, priority).
type Member struct {
	// Destination is the loop id of the destination whose rate the member
	// shares.
	Destination string `json:"destination"`
	// Weight is the member's share within its priority class, > 0.
	Weight float64 `json:"weight"`
	// Priority is the member's strict class: the higher classes are served
	// first (0 by default).
	Priority int `json:"priority,omitempty"`
}

// memberAttrs are the attributes a member's PARAMS may hold: its own rate
// bounds, consumers' settings and mapping; the signals, controllers, tick
// period and RATE lifetime are the destination's.
var memberAttrs = map[string]bool{
	"enabled": true, attrMinRate: true, attrMaxRate: true, "demand_headroom": true, "depth_queue": true, attrDepthRetention: true,
	attrESMUUID: true, attrESMUpdateInterval: true, attrESMMinConcurrency: true, attrESMMaxConcurrency: true,
	AttrDestination: true, AttrWeight: true, AttrPriority: true,
}

// The member's attributes (paramTable): destination creates Params.Member;
// weight and priority need it.

var destinationCodec = codec{
	decode: func(d *decoder, p *Params, name string) {
		if !d.present(name) {
			return
		}
		p.Member = &Member{Destination: d.str(name, ""), Weight: DefaultWeight}
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Member != nil {
			a[name] = p.Member.Destination
		}
	},
}

// needsDestination reports whether a member attribute can be read: refused
// when the loop names no destination.
func needsDestination(d *decoder, p *Params, name string) bool {
	if p.Member != nil {
		return true
	}
	if d.present(name) {
		d.fail(name, "the loop is no member: set %s (the loop id of the destination it shares) first", AttrDestination)
	}
	return false
}

var weightCodec = codec{
	decode: func(d *decoder, p *Params, name string) {
		if needsDestination(d, p, name) {
			p.Member.Weight = d.number(name, DefaultWeight)
		}
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Member != nil {
			a[name] = p.Member.Weight
		}
	},
}

var priorityCodec = codec{
	decode: func(d *decoder, p *Params, name string) {
		if !needsDestination(d, p, name) {
			return
		}
		v := d.number(name, 0)
		if v != math.Trunc(v) || math.Abs(v) > 1000 {
			d.fail(name, "%v must be a whole number in -1000..1000", v)
			return
		}
		p.Member.Priority = int(v)
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Member != nil && p.Member.Priority != 0 {
			a[name] = float64(p.Member.Priority)
		}
	},
}

// memberOnly refuses, in a member's PARAMS, the attributes that belong to
// its destination.
func (d *decoder) memberOnly(dest string) {
	for _, name := range sortedKeys(d.attrs) {
		if _, known := lookupParamIn(d.sources, name); known && !memberAttrs[name] {
			d.fail(name, "belongs to the destination: a member (destination %q) has no controller, metric or tick of its own; set it in %q's PARAMS", truncate(dest), truncate(dest))
		}
	}
}

// checkMember checks a member's own parameters: its destination, weight
// and rate bounds.
func (p Params) checkMember(fail failFunc) {
	m := p.Member
	switch {
	case strings.TrimSpace(m.Destination) == "":
		fail(AttrDestination, "empty: name the loop id of the destination the member shares")
	case m.Destination == p.Loop:
		fail(AttrDestination, "%q is the loop itself: a member shares another loop's rate", truncate(m.Destination))
	}
	if !finite(m.Weight) || m.Weight <= 0 {
		fail(AttrWeight, "%v must be a finite number > 0", m.Weight)
	}
	p.checkRates(fail)
	p.checkMapping(fail)
	p.checkForeign(fail)
}

// MembershipProblems checks the members among loops (loop id → PARAMS
// attributes, as stored) against each other: a member whose destination has
// no PARAMS, is itself a member (a destination holds the controllers and
// cannot share another's rate), or closes a cycle. It returns the refusal of
// each such member's destination attribute, keyed by loop id; nil when there
// is none. The checks of one item alone are DecodeParams'.
func MembershipProblems(loops map[string]map[string]any) map[string]FieldError {
	destOf := func(id string) (string, bool) {
		s, ok := loops[id][AttrDestination].(string)
		return s, ok && s != ""
	}
	var out map[string]FieldError
	for _, id := range slices.Sorted(maps.Keys(loops)) {
		dest, ok := destOf(id)
		if !ok || dest == id {
			continue
		}
		reason := ""
		if attrs, exists := loops[dest]; !exists || attrs == nil {
			reason = fmt.Sprintf("%q: no such loop (the destination needs its PARAMS, with the signals and controllers)", truncate(dest))
		} else if next, member := destOf(dest); member {
			reason = fmt.Sprintf("%q is itself a member (of %q): a destination holds the controllers and cannot share another's rate", truncate(dest), truncate(next))
			if cycle := memberCycle(id, destOf); cycle != "" {
				reason = "a cycle: " + cycle
			}
		}
		if reason != "" {
			if out == nil {
				out = map[string]FieldError{}
			}
			out[id] = FieldError{Field: AttrDestination, Reason: reason}
		}
	}
	return out
}

// memberCycle returns the chain of destinations from id back to id ("a → b
// → a"), "" when id is on no cycle.
func memberCycle(id string, destOf func(string) (string, bool)) string {
	chain := []string{id}
	for cur := id; len(chain) <= 64; {
		next, ok := destOf(cur)
		if !ok {
			return ""
		}
		chain = append(chain, next)
		if next == id {
			return strings.Join(chain, " → ")
		}
		if slices.Contains(chain[:len(chain)-1], next) {
			return ""
		}
		cur = next
	}
	return ""
}
