package wrr_test

import (
	"fmt"

	"github.com/sluice-dev/sluice/pkg/wrr"
)

// The picker interleaves nodes by weight.
func ExamplePicker() {
	p, _ := wrr.NewPicker(map[string]float64{"a": 5, "b": 1, "c": 1})
	for i := 0; i < 7; i++ {
		fmt.Print(p.Pick(), " ")
	}
	fmt.Println()
	// Output: a a b a c a a
}
