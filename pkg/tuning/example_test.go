package tuning_test

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/tuning"
)

// SIMC on the reference plant: 0.05 points of CPU per message/s, 15 s lag,
// 5 s dead time.
func ExampleTune() {
	plant := control.FOPDT{Gain: 0.05, Tau: 15 * time.Second, DeadTime: 5 * time.Second, Base: 10}
	g, err := tuning.Tune(plant, tuning.SIMC, tuning.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("kp=%.1f (msg/s) per point, ki=%.2f (msg/s) per point-second, Ti=%v\n", g.Kp, g.Ki, g.Ti)
	// Output: kp=30.0 (msg/s) per point, ki=2.00 (msg/s) per point-second, Ti=15s
}

// The controller sees the plant through CloudWatch: 60 s averages published
// 90 s late, read every 60 s, add 30 + 90 + 30 s to the dead time.
func ExampleLoopModel() {
	plant := control.FOPDT{Gain: 0.05, Tau: 15 * time.Second, DeadTime: 5 * time.Second, Base: 10}
	loop := tuning.LoopModel(plant, 30*time.Second+90*time.Second+30*time.Second)
	g, err := tuning.Tune(loop, tuning.SIMC, tuning.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("dead time %v: kp=%.3f, ki=%.4f per s, Ti=%v\n", loop.DeadTime, g.Kp, g.Ki, g.Ti)
	// Output: dead time 2m35s: kp=0.968, ki=0.0645 per s, Ti=15s
}

func ExampleParseRule() {
	for _, name := range []string{"simc", "lambda", "ziegler-nichols", "pid"} {
		r, err := tuning.ParseRule(name)
		fmt.Println(r, err)
	}
	// Output:
	// simc <nil>
	// imc <nil>
	// zn <nil>
	//  unknown tuning rule "pid": want simc, imc, zn or cc
}
