// Package plot draws line charts for the lab, the dashboard and the docs:
// stacked panels that share the time axis, several named series per panel, a
// legend, axis ticks and labels, and optional shaded intervals (a stale
// metric, a saturated output). It writes SVG, and PNG through image/png, and
// uses only the standard library.
//
// gonum.org/v1/plot draws nicer text (a real anti-aliased font where the PNG
// here has a 5x7 bitmap one) but was not taken: its legend sits inside the
// plot area, over the lines; its default ticks are sparse (three on a
// three-hour axis); its SVG has no per-series group naming the line; and it
// adds about 7 MB and some 30 modules to a binary. Matching this layout with
// it would keep most of layout.go (ticks, legend placement, shades, gaps).
package plot

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Figure is a chart of stacked panels that share the x axis.
type Figure struct {
	// Title is drawn above the first panel.
	Title string
	// XLabel labels the shared x axis, e.g. "time (min)".
	XLabel string
	// Width is the width in pixels; zero means 960.
	Width int
	// PanelHeight is the height of each panel's plot area in pixels; zero
	// means 220.
	PanelHeight int
	// Panels are drawn top to bottom.
	Panels []Panel
}

// Panel is one plot area with its own y axis.
type Panel struct {
	// Title is drawn above the plot area.
	Title string
	// YLabel labels the y axis, with its unit, e.g. "CPU (%)".
	YLabel string
	// YMin and YMax fix the y range when YMax > YMin; otherwise the range
	// covers the data.
	YMin, YMax float64
	// Series are the lines, drawn in order.
	Series []Series
	// Shades are intervals of x shaded behind the lines.
	Shades []Shade
}

// Series is one line. A NaN or infinite Y leaves a gap.
type Series struct {
	// Name is shown in the legend; an empty name keeps the series out of it.
	Name string
	// X and Y are the points; they must have the same length.
	X, Y []float64
	// Color is an SVG color ("#1f77b4", "red"); empty picks one from the
	// palette by the series' position in its panel.
	Color string
	// Dashed draws a dashed line (for setpoints and references).
	Dashed bool
	// Width is the stroke width in pixels; zero means 1.5.
	Width float64
}

// Shade is a shaded interval of x, from From to To.
type Shade struct {
	From, To float64
	// Label is shown in the legend (once per distinct label).
	Label string
	// Color is an SVG color; empty means light grey.
	Color string
}

// Validate reports whether the figure can be drawn.
func (f Figure) Validate() error {
	if len(f.Panels) == 0 {
		return fmt.Errorf("plot %q: no panels", f.Title)
	}
	for i, p := range f.Panels {
		for j, s := range p.Series {
			if len(s.X) != len(s.Y) {
				return fmt.Errorf("plot %q panel %d (%s) series %d (%s): %d x values and %d y values",
					f.Title, i, p.Title, j, s.Name, len(s.X), len(s.Y))
			}
		}
	}
	return nil
}

// WriteFile writes the figure to path as SVG or PNG, chosen by the file's
// extension (.svg or .png).
func (f Figure) WriteFile(path string) (err error) {
	var write func(io.Writer) error
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg":
		write = f.WriteSVG
	case ".png":
		write = f.WritePNG
	default:
		return fmt.Errorf("plot file %q: want a name ending in .svg or .png", path)
	}
	if err := f.Validate(); err != nil {
		return err
	}
	file, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	defer func() {
		if cerr := file.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("plot: %w", cerr)
		}
	}()
	if err := write(file); err != nil {
		return fmt.Errorf("plot %s: %w", path, err)
	}
	return nil
}

// CheckPath reports whether path names a plot file WriteFile can write
// (by extension), so that a command can refuse a bad --plot before it runs.
func CheckPath(path string) error {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".svg", ".png":
		return nil
	}
	return fmt.Errorf("plot file %q: want a name ending in .svg or .png", path)
}
