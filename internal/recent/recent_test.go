package recent

import (
	"fmt"
	"testing"
)

// A Map remembers the last capacity keys put, each with its last value,
// and forgets the oldest (by first Put) once full.
func TestMap(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
		puts     []string // key=value
		want     map[string]int
		gone     []string
	}{
		{name: "empty", capacity: 3, want: map[string]int{}, gone: []string{"a"}},
		{name: "under capacity", capacity: 3, puts: []string{"a=1", "b=2"}, want: map[string]int{"a": 1, "b": 2}, gone: []string{"c"}},
		{name: "full", capacity: 3, puts: []string{"a=1", "b=2", "c=3"}, want: map[string]int{"a": 1, "b": 2, "c": 3}},
		{name: "forgets the oldest", capacity: 3, puts: []string{"a=1", "b=2", "c=3", "d=4"},
			want: map[string]int{"b": 2, "c": 3, "d": 4}, gone: []string{"a"}},
		{name: "forgets in order of first put", capacity: 3, puts: []string{"a=1", "b=2", "c=3", "d=4", "e=5", "f=6", "g=7"},
			want: map[string]int{"e": 5, "f": 6, "g": 7}, gone: []string{"a", "b", "c", "d"}},
		{name: "a put again keeps its age", capacity: 2, puts: []string{"a=1", "b=2", "a=3", "c=4"},
			want: map[string]int{"b": 2, "c": 4}, gone: []string{"a"}},
		{name: "a put again replaces its value", capacity: 2, puts: []string{"a=1", "a=2", "b=3"},
			want: map[string]int{"a": 2, "b": 3}},
		{name: "capacity one", capacity: 1, puts: []string{"a=1", "b=2"}, want: map[string]int{"b": 2}, gone: []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New[string, int](tc.capacity)
			for _, p := range tc.puts {
				var k string
				var v int
				if _, err := fmt.Sscanf(p, "%1s=%d", &k, &v); err != nil {
					t.Fatalf("put %q: %v", p, err)
				}
				m.Put(k, v)
			}
			if m.Len() != len(tc.want) {
				t.Errorf("Len() = %d; want %d", m.Len(), len(tc.want))
			}
			for k, want := range tc.want {
				if got, ok := m.Get(k); !ok || got != want || !m.Has(k) {
					t.Errorf("Get(%q) = %d, %v, Has %v; want %d, true, true", k, got, ok, m.Has(k), want)
				}
			}
			for _, k := range tc.gone {
				if got, ok := m.Get(k); ok || m.Has(k) {
					t.Errorf("Get(%q) = %d, true; want it forgotten", k, got)
				}
			}
		})
	}
}

// A Map holds at most its capacity however many keys are put.
func TestMapStaysBounded(t *testing.T) {
	m := New[int, struct{}](100)
	for i := range 1000 {
		m.Put(i, struct{}{})
		if m.Len() > 100 || len(m.ring) > 100 {
			t.Fatalf("after %d puts: Len() = %d, ring of %d; want at most 100", i+1, m.Len(), len(m.ring))
		}
	}
	for i := range 1000 {
		if m.Has(i) != (i >= 900) {
			t.Errorf("Has(%d) = %v; want %v", i, m.Has(i), i >= 900)
		}
	}
}

// New refuses a capacity that is not positive.
func TestNewPanicsWithoutCapacity(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New(0) did not panic")
		}
	}()
	New[string, int](0)
}
