package loop

import (
	"math"
	"strings"
)

// The esm_* PARAMS attributes of a loop that owns an SQS event source
// mapping (mapping.go), declared in paramTable.

// Attribute names of a loop's event source mapping.
const (
	attrESMUUID           = "esm_uuid"
	attrESMKind           = "esm_kind"
	attrESMUpdateInterval = "esm_update_interval"
	attrESMMinConcurrency = "esm_min_concurrency"
	attrESMMaxConcurrency = "esm_max_concurrency"
)

// The esm_* attributes (paramTable). esm_uuid creates Params.Mapping with
// the defaults; the others need it.

var esmUUID = codec{
	decode: func(d *decoder, p *Params, name string) {
		if !d.present(name) {
			return
		}
		p.Mapping = &MappingConfig{UUID: d.str(name, ""), UpdateInterval: DefaultMappingUpdateInterval,
			Min: MinMappingConcurrency, Max: MaxMappingConcurrency}
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Mapping != nil {
			a[name] = p.Mapping.UUID
		}
	},
}

// needsMapping reports whether an esm_* attribute can be read: refused when
// the loop owns no mapping.
func needsMapping(d *decoder, p *Params, name string) bool {
	if p.Mapping != nil {
		return true
	}
	if d.present(name) {
		d.fail(name, "the loop owns no event source mapping; set %s first", attrESMUUID)
	}
	return false
}

var esmKind = codec{
	decode: func(d *decoder, p *Params, name string) {
		if needsMapping(d, p, name) {
			p.Mapping.Kind = MappingKind(d.str(name, string(MappingSQS)))
		}
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Mapping != nil && p.Mapping.Kind != MappingSQS && p.Mapping.Kind != "" {
			a[name] = string(p.Mapping.Kind)
		}
	},
}

var esmUpdateInterval = codec{
	decode: func(d *decoder, p *Params, name string) {
		if needsMapping(d, p, name) {
			p.Mapping.UpdateInterval = d.duration(name, DefaultMappingUpdateInterval)
		}
	},
	encode: func(p Params, a map[string]any, name string) {
		if p.Mapping != nil {
			a[name] = p.Mapping.UpdateInterval.String()
		}
	},
}

func esmConcurrency(f func(*MappingConfig) *int, def int) codec {
	return codec{
		decode: func(d *decoder, p *Params, name string) {
			if !needsMapping(d, p, name) {
				return
			}
			v := d.number(name, float64(def))
			switch {
			case v != math.Trunc(v):
				d.fail(name, "%v is not a whole number of instances", v)
			case v < MinMappingConcurrency || v > MaxMappingConcurrency:
				d.fail(name, "%v is outside %d..%d, the MaximumConcurrency an SQS event source mapping accepts", v, MinMappingConcurrency, MaxMappingConcurrency)
			default:
				*f(p.Mapping) = int(v)
			}
		},
		encode: func(p Params, a map[string]any, name string) {
			if p.Mapping != nil {
				a[name] = float64(*f(p.Mapping))
			}
		},
	}
}

// esmText is a string attribute of the mapping, absent when "".
func esmText(f func(*MappingConfig) *string) codec {
	return codec{
		decode: func(d *decoder, p *Params, name string) {
			if needsMapping(d, p, name) {
				*f(p.Mapping) = d.str(name, "")
			}
		},
		encode: func(p Params, a map[string]any, name string) {
			if p.Mapping != nil && *f(p.Mapping) != "" {
				a[name] = *f(p.Mapping)
			}
		},
	}
}

// checkMapping checks the event source mapping's settings.
func (p Params) checkMapping(fail failFunc) {
	m := p.Mapping
	if m == nil {
		return
	}
	if strings.TrimSpace(m.UUID) == "" {
		fail(attrESMUUID, "empty; want the event source mapping's UUID (aws lambda list-event-source-mappings)")
	}
	if m.Kind != "" && m.Kind != MappingSQS && m.Kind != MappingKafka {
		fail(attrESMKind, "unknown kind %q; want sqs or kafka", truncate(string(m.Kind)))
	}
	if m.UpdateInterval <= 0 {
		fail(attrESMUpdateInterval, "%v must be positive", m.UpdateInterval)
	}
	for _, b := range []struct {
		name string
		v    int
	}{{attrESMMinConcurrency, m.Min}, {attrESMMaxConcurrency, m.Max}} {
		if b.v < MinMappingConcurrency || b.v > MaxMappingConcurrency {
			fail(b.name, "%d is outside %d..%d, the MaximumConcurrency an SQS event source mapping accepts", b.v, MinMappingConcurrency, MaxMappingConcurrency)
		}
	}
	if m.Min > m.Max {
		fail(attrESMMinConcurrency, "%d is above esm_max_concurrency %d", m.Min, m.Max)
	}
}
