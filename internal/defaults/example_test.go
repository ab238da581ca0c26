package defaults_test

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/internal/defaults"
)

type config struct {
	BatchSize int           // default 10
	MaxHold   time.Duration // default 2 s
}

func (c config) withDefaults() config {
	c.BatchSize = defaults.Positive(c.BatchSize, 10)
	c.MaxHold = defaults.Positive(c.MaxHold, 2*time.Second)
	return c
}

func ExamplePositive() {
	fmt.Println(config{}.withDefaults())
	fmt.Println(config{BatchSize: 4, MaxHold: -time.Second}.withDefaults())
	// Output:
	// {10 2s}
	// {4 2s}
}
