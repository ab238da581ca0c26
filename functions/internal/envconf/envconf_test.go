package envconf_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/functions/internal/envconf"
)

func TestReader(t *testing.T) {
	env := map[string]string{"S": "x", "R": "2.5", "D": "3s", "N": "4", "L": " a, b,,", "OFF": "off"}
	r := envconf.New(func(k string) string { return env[k] })
	if got := r.String("S", "d"); got != "x" {
		t.Errorf("String(S) = %q; want x", got)
	}
	if got := r.String("MISSING", "d"); got != "d" {
		t.Errorf("String(MISSING) = %q; want the default d", got)
	}
	if got := r.Rate("R", 1); got != 2.5 {
		t.Errorf("Rate(R) = %v; want 2.5", got)
	}
	if got := r.Duration("D", time.Second, "1s"); got != 3*time.Second {
		t.Errorf("Duration(D) = %v; want 3s", got)
	}
	if got := r.Count("N", 1); got != 4 {
		t.Errorf("Count(N) = %d; want 4", got)
	}
	if got := r.Count("MISSING", 7); got != 7 {
		t.Errorf("Count(MISSING) = %d; want the default 7", got)
	}
	if got := r.List("L"); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("List(L) = %q; want [a b]", got)
	}
	if r.On("OFF") || !r.On("MISSING") {
		t.Errorf("On(OFF), On(MISSING) = %v, %v; want false, true", r.On("OFF"), r.On("MISSING"))
	}
	if err := r.Err(); err != nil {
		t.Errorf("Err() = %v; want nil", err)
	}
}

func TestReaderRefuses(t *testing.T) {
	tests := []struct {
		name, value string
		read        func(r *envconf.Reader)
		want        string
	}{
		{"rate", "-1", func(r *envconf.Reader) { r.Rate("V", 1) }, `V="-1": want a rate >= 0 in messages/s`},
		{"duration", "soon", func(r *envconf.Reader) { r.Duration("V", time.Second, "30s") }, `V="soon": want a positive duration such as 30s`},
		{"zero duration", "0s", func(r *envconf.Reader) { r.Duration("V", time.Second, "1s") }, `V="0s": want a positive duration such as 1s`},
		{"count", "0", func(r *envconf.Reader) { r.Count("V", 1) }, `V="0": want a count >= 1`},
		{"parse", "x", func(r *envconf.Reader) {
			envconf.Parse(r, "V", func(v string) (int, error) { return strconv.Atoi(v) })
		}, `strconv.Atoi: parsing "x": invalid syntax`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := envconf.New(func(k string) string { return map[string]string{"V": tt.value, "C": "0"}[k] })
			tt.read(r)
			r.Count("C", 1) // a later error does not replace the first
			if err := r.Err(); err == nil || err.Error() != tt.want {
				t.Errorf("Err() = %v; want %s", err, tt.want)
			}
		})
	}
}

func ExampleReader() {
	env := map[string]string{"SLUICE_SAFE_RATE": "25", "SLUICE_CONSUMERS": "zero"}
	r := envconf.New(func(k string) string { return env[k] })
	rate := r.Rate("SLUICE_SAFE_RATE", 10)
	loop := r.String("SLUICE_LOOP", "default")
	n := r.Count("SLUICE_CONSUMERS", 1)
	fmt.Println(rate, loop, n, r.Err())
	// Output: 25 default 1 SLUICE_CONSUMERS="zero": want a count >= 1
}
