package ident_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-dev/sluice/pkg/control"
	"github.com/sluice-dev/sluice/pkg/ident"
)

// A step test of the reference plant (gain 0.05 points per message/s, 15 s
// lag, 5 s dead time, 10 % base load), sampled every second, identified back.
func ExampleFit() {
	plant := control.FOPDT{Gain: 0.05, Tau: 15 * time.Second, DeadTime: 5 * time.Second, Base: 10}
	var d ident.Data
	for t := 0.0; t < 300; t++ {
		u := 600.0
		if t >= 60 {
			u = 1200
		}
		d.T, d.U = append(d.T, t), append(d.U, u)
	}
	d.Y = ident.Simulate(plant, d.T, d.U)
	r, err := ident.Fit(d)
	if err != nil {
		fmt.Println(err)
		return
	}
	m := r.Model
	fmt.Printf("gain %.3f, tau %v, dead time %v, base %.1f, rmse %.3f\n",
		m.Gain, m.Tau.Round(100*time.Millisecond), m.DeadTime.Round(100*time.Millisecond), m.Base, r.RMSE)
	// Output: gain 0.050, tau 15s, dead time 5s, base 10.0, rmse 0.000
}

func ExampleReadCSV() {
	in := "t_s,input,output\n0,600,40\n1,600,40\n2,1200,40\n"
	d, err := ident.ReadCSV(strings.NewReader(in))
	fmt.Println(d.Len(), err)
	_, err = ident.Fit(d)
	fmt.Println(err)
	_, err = ident.ReadCSV(strings.NewReader("t_s,input,output\n0,600,NaN\n"))
	fmt.Println(err)
	// Output:
	// 3 <nil>
	// step test has 3 samples, need at least 10: too few samples
	// read step test CSV line 2: output is "NaN": value is NaN or infinite
}
