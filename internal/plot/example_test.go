package plot_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-dev/sluice/internal/plot"
)

// Two panels sharing the time axis: CPU with its setpoint, and the allowed
// rate, with the interval during which the metric was stale shaded.
func ExampleFigure_WriteFile() {
	t := []float64{0, 1, 2, 3, 4, 5}
	fig := plot.Figure{
		Title:  "pi on the reference scenario",
		XLabel: "time (min)",
		Panels: []plot.Panel{
			{
				Title: "CPU", YLabel: "CPU (%)", YMin: 0, YMax: 100,
				Series: []plot.Series{
					{Name: "setpoint", X: t, Y: []float64{70, 70, 70, 70, 70, 70}, Dashed: true, Color: "black"},
					{Name: "true CPU", X: t, Y: []float64{10, 40, 62, 71, 70, 70}},
				},
				Shades: []plot.Shade{{From: 0, To: 2, Label: "stale metric"}},
			},
			{
				Title: "Allowed rate", YLabel: "rate (msg/s)",
				Series: []plot.Series{{Name: "pi", X: t, Y: []float64{0, 600, 1100, 1200, 1200, 1200}}},
			},
		},
	}
	dir, err := os.MkdirTemp("", "plot")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"cpu.svg", "cpu.png", "cpu.pdf"} {
		err := fig.WriteFile(filepath.Join(dir, name))
		fmt.Println(name, err == nil)
	}
	// Output:
	// cpu.svg true
	// cpu.png true
	// cpu.pdf false
}
