package main

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := `goos: linux
BenchmarkUpdate/pi-2         	   20000	        41.55 ns/op	       0 B/op	       0 allocs/op
BenchmarkUpdate/pi-aw-spf-ff-2         	   20000	      3349 ns/op	     511 B/op	       2 allocs/op
BenchmarkFit-2   	      30	  33000000 ns/op
PASS
`
	got, order, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(order) != 3 {
		t.Fatalf("parse found %d benchmarks (%v); want 3", len(order), order)
	}
	if r := got["BenchmarkUpdate/pi-aw-spf-ff"]; r.NsOp != 3349 || r.BytesOp != 511 || r.AllocsOp != 2 || r.N != 20000 {
		t.Errorf("pi-aw-spf-ff = %+v; want 3349 ns/op, 511 B/op, 2 allocs/op, n 20000", r)
	}
	if r := got["BenchmarkFit"]; r.NsOp != 33000000 {
		t.Errorf("BenchmarkFit = %+v; want 33000000 ns/op", r)
	}
	if v := ratio(got, "BenchmarkUpdate/pi-aw-spf-ff", "BenchmarkUpdate/pi"); v.(float64) < 80 || v.(float64) > 81 {
		t.Errorf("ratio = %v; want 3349/41.55", v)
	}
	plus, _, err := parse(strings.NewReader("BenchmarkInnerLoop/pacer+inner-2   \t  20000\t  110 ns/op\nBenchmarkInnerLoop/pacer-2 \t 20000\t 220 ns/op\n"))
	if v := ratio(plus, "BenchmarkInnerLoop/pacer+inner", "BenchmarkInnerLoop/pacer"); err != nil || v != 0.5 {
		t.Errorf("ratio of a name with a + = %v, %v; want 0.5", v, err)
	}
	if v := ratio(got, "BenchmarkUpdate/missing", "BenchmarkUpdate/pi"); v != nil {
		t.Errorf("ratio with a missing benchmark = %v; want nil", v)
	}
}
