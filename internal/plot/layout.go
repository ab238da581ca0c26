package plot

import (
	"fmt"
	"math"
	"strconv"

	"github.com/sluice-dev/sluice/internal/defaults"
)

// palette is Tableau 10, distinguishable in print and by most color-blind
// readers.
var palette = [...]string{
	"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
	"#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
}

// seriesColor returns the color of series i of a panel.
func seriesColor(s Series, i int) string {
	if s.Color != "" {
		return s.Color
	}
	return palette[i%len(palette)]
}

const (
	marginLeft   = 72.0
	marginRight  = 190.0
	titleHeight  = 34.0
	panelTitle   = 22.0
	panelGap     = 16.0
	marginBottom = 52.0
	fontSize     = 12.0
	legendLine   = 16.0
	shadeDefault = "#d9d9d9"
	gridColor    = "#e6e6e6"
	axisColor    = "#444444"
	textColor    = "#222222"
)

type point struct{ x, y float64 }

type anchor int

const (
	anchorStart anchor = iota
	anchorMiddle
	anchorEnd
)

// canvas is what a figure is drawn on: SVG or a raster image.
type canvas interface {
	// begin starts a drawing of w x h pixels.
	begin(w, h float64)
	// rect fills a rectangle; stroke is empty for none.
	rect(x, y, w, h float64, fill string, opacity float64, stroke string)
	// line draws a polyline clipped to clip; name is the series' name (for
	// SVG's title element) or empty for axes and grid lines.
	line(pts []point, color string, width float64, dashed bool, clip *rectangle, name string)
	// text draws s with its baseline at y; vertical text reads bottom to top.
	text(x, y float64, s string, size float64, a anchor, vertical bool, color string)
	// end finishes the drawing and writes it out.
	end() error
}

// render validates the figure, draws it on c and writes it out in format.
func (f Figure) render(c canvas, format string) error {
	if err := f.Validate(); err != nil {
		return err
	}
	f.draw(c)
	if err := c.end(); err != nil {
		return fmt.Errorf("write %s: %w", format, err)
	}
	return nil
}

type rectangle struct{ x, y, w, h float64 }

// size returns the figure's width and height in pixels.
func (f Figure) size() (w, h, ph float64) {
	w = defaults.Positive(float64(f.Width), 960)
	ph = defaults.Positive(float64(f.PanelHeight), 220)
	h = titleHeight + float64(len(f.Panels))*(panelTitle+ph) + float64(len(f.Panels)-1)*panelGap + marginBottom
	return w, h, ph
}

// draw lays the figure out on c: the title, each panel with its own y
// axis and legend, and the shared x axis's label.
func (f Figure) draw(c canvas) {
	w, h, ph := f.size()
	c.begin(w, h)
	c.rect(0, 0, w, h, "#ffffff", 1, "")
	if f.Title != "" {
		c.text(w/2, 22, f.Title, fontSize+3, anchorMiddle, false, textColor)
	}
	pw := math.Max(w-marginLeft-marginRight, 50)
	xmin, xmax := f.xRange()
	xs := xScale{min: xmin, max: xmax, ticks: ticks(xmin, xmax, int(pw/90))}
	for i, p := range f.Panels {
		top := titleHeight + float64(i)*(panelTitle+ph+panelGap) + panelTitle
		p.draw(c, rectangle{marginLeft, top, pw, ph}, xs, i == len(f.Panels)-1)
	}
	if f.XLabel != "" {
		c.text(marginLeft+pw/2, h-12, f.XLabel, fontSize, anchorMiddle, false, textColor)
	}
}

// xScale is the x axis every panel shares.
type xScale struct {
	min, max float64
	ticks    tickSet
}

// xRange returns the x range of every finite point of the figure.
func (f Figure) xRange() (float64, float64) {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	for _, p := range f.Panels {
		for _, s := range p.Series {
			for i, x := range s.X {
				if finite(x) && finite(s.Y[i]) {
					xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
				}
			}
		}
	}
	if !(xmax >= xmin) {
		return 0, 1
	}
	if xmax == xmin {
		return xmin - 0.5, xmax + 0.5
	}
	return xmin, xmax
}

// draw lays panel p out in area: its title, shades, grid and axes, its
// series, and its legend to the right of area. Only the last panel labels
// the x ticks.
func (p Panel) draw(c canvas, area rectangle, xs xScale, last bool) {
	if p.Title != "" {
		c.text(area.x, area.y-7, p.Title, fontSize+1, anchorStart, false, textColor)
	}
	ymin, ymax := p.yRange()
	yticks := ticks(ymin, ymax, int(area.h/40))
	px := func(x float64) float64 { return area.x + (x-xs.min)/(xs.max-xs.min)*area.w }
	py := func(y float64) float64 { return area.y + area.h - (y-ymin)/(ymax-ymin)*area.h }

	for _, s := range p.Shades {
		a, b := math.Max(s.From, xs.min), math.Min(s.To, xs.max)
		if b > a {
			c.rect(px(a), area.y, px(b)-px(a), area.h, orDefault(s.Color, shadeDefault), 0.6, "")
		}
	}
	for _, t := range yticks.values {
		y := py(t)
		c.line([]point{{area.x, y}, {area.x + area.w, y}}, gridColor, 1, false, nil, "")
		c.line([]point{{area.x - 4, y}, {area.x, y}}, axisColor, 1, false, nil, "")
		c.text(area.x-7, y+4, yticks.format(t), fontSize-1, anchorEnd, false, textColor)
	}
	for _, t := range xs.ticks.values {
		x := px(t)
		c.line([]point{{x, area.y}, {x, area.y + area.h}}, gridColor, 1, false, nil, "")
		c.line([]point{{x, area.y + area.h}, {x, area.y + area.h + 4}}, axisColor, 1, false, nil, "")
		if last {
			c.text(x, area.y+area.h+17, xs.ticks.format(t), fontSize-1, anchorMiddle, false, textColor)
		}
	}
	c.rect(area.x, area.y, area.w, area.h, "", 0, axisColor)
	if p.YLabel != "" {
		c.text(16, area.y+area.h/2, p.YLabel, fontSize, anchorMiddle, true, textColor)
	}
	for j, s := range p.Series {
		width := defaults.Positive(s.Width, 1.5)
		for _, seg := range segments(s, px, py, area) {
			c.line(seg, seriesColor(s, j), width, s.Dashed, &area, s.Name)
		}
	}
	p.drawLegend(c, area.x+area.w+14, area.y+12)
}

// drawLegend lists the panel's named series, then its distinct shade
// labels, from (lx, ly) down.
func (p Panel) drawLegend(c canvas, lx, ly float64) {
	for j, s := range p.Series {
		if s.Name == "" {
			continue
		}
		width := defaults.Positive(s.Width, 1.5)
		c.line([]point{{lx, ly - 4}, {lx + 22, ly - 4}}, seriesColor(s, j), math.Max(width, 2), s.Dashed, nil, "")
		c.text(lx+28, ly, s.Name, fontSize-1, anchorStart, false, textColor)
		ly += legendLine
	}
	seen := map[string]bool{}
	for _, s := range p.Shades {
		if s.Label == "" || seen[s.Label] {
			continue
		}
		seen[s.Label] = true
		c.rect(lx, ly-10, 22, 10, orDefault(s.Color, shadeDefault), 0.6, "")
		c.text(lx+28, ly, s.Label, fontSize-1, anchorStart, false, textColor)
		ly += legendLine
	}
}

// yRange returns the panel's y range: fixed, or the data's with a margin.
func (p Panel) yRange() (float64, float64) {
	if p.YMax > p.YMin {
		return p.YMin, p.YMax
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p.Series {
		for i, y := range s.Y {
			if finite(y) && finite(s.X[i]) {
				lo, hi = math.Min(lo, y), math.Max(hi, y)
			}
		}
	}
	if !(hi >= lo) {
		return 0, 1
	}
	if hi == lo {
		d := math.Max(1, math.Abs(lo)*0.1)
		return lo - d, hi + d
	}
	pad := (hi - lo) * 0.04
	return lo - pad, hi + pad
}

// segments returns the series in pixels, split at non-finite points and
// thinned to at most four points per pixel column (first, minimum, maximum,
// last), which keeps long runs small without changing what is drawn.
func segments(s Series, px, py func(float64) float64, area rectangle) [][]point {
	var out [][]point
	var cur []point
	flush := func() {
		if len(cur) > 0 {
			out = append(out, thin(cur))
			cur = nil
		}
	}
	for i := range s.X {
		if !finite(s.X[i]) || !finite(s.Y[i]) {
			flush()
			continue
		}
		cur = append(cur, point{px(s.X[i]), py(s.Y[i])})
	}
	flush()
	return out
}

func thin(pts []point) []point {
	if len(pts) < 8 {
		return pts
	}
	out := make([]point, 0, len(pts))
	start := 0
	for start < len(pts) {
		col := math.Floor(pts[start].x)
		end := start + 1
		for end < len(pts) && math.Floor(pts[end].x) == col {
			end++
		}
		group := pts[start:end]
		if len(group) <= 4 {
			out = append(out, group...)
		} else {
			lo, hi := 0, 0
			for k, p := range group {
				if p.y < group[lo].y {
					lo = k
				}
				if p.y > group[hi].y {
					hi = k
				}
			}
			a, b := min(lo, hi), max(lo, hi)
			out = append(out, group[0])
			if a != 0 {
				out = append(out, group[a])
			}
			if b != a && b != len(group)-1 {
				out = append(out, group[b])
			}
			out = append(out, group[len(group)-1])
		}
		start = end
	}
	return out
}

// tickSet is a set of round tick values.
type tickSet struct {
	values []float64
	step   float64
}

// ticks returns about n round ticks (1, 2 or 5 times a power of ten apart)
// within [lo, hi].
func ticks(lo, hi float64, n int) tickSet {
	n = max(n, 2)
	if !(hi > lo) || !finite(lo) || !finite(hi) {
		return tickSet{}
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if (hi-lo)/(m*mag) <= float64(n)+1 {
			step = m * mag
			break
		}
	}
	var ts tickSet
	ts.step = step
	for k := math.Ceil(lo/step - 1e-9); k*step <= hi+step*1e-9; k++ {
		v := k * step
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		ts.values = append(ts.values, v)
	}
	return ts
}

// format prints a tick value with as many decimals as the step needs.
func (ts tickSet) format(v float64) string {
	dec := 0
	for dec < 8 && ts.step > 0 {
		scaled := ts.step * math.Pow(10, float64(dec))
		if math.Abs(scaled-math.Round(scaled)) < 1e-6*scaled {
			break
		}
		dec++
	}
	if math.Abs(v) >= 1e6 || (v != 0 && math.Abs(v) < 1e-4) {
		return strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', dec, 64)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
