package plot

import (
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
	"strconv"
	"strings"
)

// WritePNG writes the figure as a PNG image: the same layout as WriteSVG,
// with anti-aliased lines and a built-in 5x7 bitmap font.
func (f Figure) WritePNG(w io.Writer) error {
	return f.render(&rasterCanvas{w: w}, "PNG")
}

// rasterCanvas draws on an RGBA image.
type rasterCanvas struct {
	w   io.Writer
	img *image.RGBA
	// cov is the coverage of the polyline being drawn, so that joints and
	// overlaps are blended once.
	cov []float32
}

func (c *rasterCanvas) end() error { return png.Encode(c.w, c.img) }

var _ canvas = (*rasterCanvas)(nil)

func (c *rasterCanvas) begin(w, h float64) {
	c.img = image.NewRGBA(image.Rect(0, 0, int(math.Ceil(w)), int(math.Ceil(h))))
	c.cov = make([]float32, c.img.Bounds().Dx()*c.img.Bounds().Dy())
}

// blend paints color col over pixel (x, y) with opacity a in [0, 1].
func (c *rasterCanvas) blend(x, y int, col color.RGBA, a float64) {
	if !(image.Point{x, y}).In(c.img.Bounds()) || a <= 0 {
		return
	}
	if a > 1 {
		a = 1
	}
	i := c.img.PixOffset(x, y)
	p := c.img.Pix[i : i+4 : i+4]
	mix := func(dst, src uint8) uint8 { return uint8(math.Round(float64(dst)*(1-a) + float64(src)*a)) }
	p[0], p[1], p[2], p[3] = mix(p[0], col.R), mix(p[1], col.G), mix(p[2], col.B), 255
}

func (c *rasterCanvas) rect(x, y, w, h float64, fill string, opacity float64, stroke string) {
	if fill != "" {
		col := parseColor(fill)
		for py := int(math.Round(y)); py < int(math.Round(y+h)); py++ {
			for px := int(math.Round(x)); px < int(math.Round(x+w)); px++ {
				c.blend(px, py, col, opacity)
			}
		}
	}
	if stroke != "" {
		x0, y0, x1, y1 := math.Round(x)+0.5, math.Round(y)+0.5, math.Round(x+w)-0.5, math.Round(y+h)-0.5
		c.line([]point{{x0, y0}, {x1, y0}, {x1, y1}, {x0, y1}, {x0, y0}}, stroke, 1, false, nil, "")
	}
}

func (c *rasterCanvas) line(pts []point, col string, width float64, dashed bool, clip *rectangle, _ string) {
	if len(pts) == 0 {
		return
	}
	segs := [][2]point{}
	if dashed {
		segs = dashes(pts, 6, 4)
	} else {
		for i := 1; i < len(pts); i++ {
			segs = append(segs, [2]point{pts[i-1], pts[i]})
		}
	}
	b := c.img.Bounds()
	lo, hi := image.Point{b.Max.X, b.Max.Y}, image.Point{b.Min.X - 1, b.Min.Y - 1}
	cx0, cy0, cx1, cy1 := b.Min.X, b.Min.Y, b.Max.X, b.Max.Y
	if clip != nil {
		cx0, cy0 = max(cx0, int(math.Floor(clip.x))), max(cy0, int(math.Floor(clip.y)))
		cx1, cy1 = min(cx1, int(math.Ceil(clip.x+clip.w))), min(cy1, int(math.Ceil(clip.y+clip.h)))
	}
	r := width / 2
	stride := b.Dx()
	for _, s := range segs {
		a, e := s[0], s[1]
		x0 := max(cx0, int(math.Floor(math.Min(a.x, e.x)-r-1)))
		x1 := min(cx1, int(math.Ceil(math.Max(a.x, e.x)+r+1)))
		y0 := max(cy0, int(math.Floor(math.Min(a.y, e.y)-r-1)))
		y1 := min(cy1, int(math.Ceil(math.Max(a.y, e.y)+r+1)))
		for y := y0; y < y1; y++ {
			for x := x0; x < x1; x++ {
				d := segDist(float64(x)+0.5, float64(y)+0.5, a, e)
				v := float32(math.Min(1, r+0.5-d))
				if v <= 0 {
					continue
				}
				i := (y-b.Min.Y)*stride + (x - b.Min.X)
				if v > c.cov[i] {
					c.cov[i] = v
				}
				lo.X, lo.Y, hi.X, hi.Y = min(lo.X, x), min(lo.Y, y), max(hi.X, x), max(hi.Y, y)
			}
		}
	}
	rgba := parseColor(col)
	for y := lo.Y; y <= hi.Y; y++ {
		for x := lo.X; x <= hi.X; x++ {
			i := (y-b.Min.Y)*stride + (x - b.Min.X)
			if v := c.cov[i]; v > 0 {
				c.blend(x, y, rgba, float64(v))
				c.cov[i] = 0
			}
		}
	}
}

// segDist returns the distance from (x, y) to the segment a-b.
func segDist(x, y float64, a, b point) float64 {
	dx, dy := b.x-a.x, b.y-a.y
	l2 := dx*dx + dy*dy
	t := 0.0
	if l2 > 0 {
		t = math.Max(0, math.Min(1, ((x-a.x)*dx+(y-a.y)*dy)/l2))
	}
	px, py := a.x+t*dx-x, a.y+t*dy-y
	return math.Hypot(px, py)
}

// dashes cuts a polyline into dashes of length on separated by gaps off.
func dashes(pts []point, on, off float64) [][2]point {
	var out [][2]point
	pos := 0.0 // position within the on+off pattern
	for i := 1; i < len(pts); i++ {
		a, b := pts[i-1], pts[i]
		l := math.Hypot(b.x-a.x, b.y-a.y)
		done := 0.0
		for done < l {
			var step float64
			if pos < on {
				step = math.Min(on-pos, l-done)
				t0, t1 := done/l, (done+step)/l
				out = append(out, [2]point{
					{a.x + t0*(b.x-a.x), a.y + t0*(b.y-a.y)},
					{a.x + t1*(b.x-a.x), a.y + t1*(b.y-a.y)},
				})
			} else {
				step = math.Min(on+off-pos, l-done)
			}
			done += step
			pos = math.Mod(pos+step, on+off)
		}
	}
	return out
}

func (c *rasterCanvas) text(x, y float64, s string, size float64, a anchor, vertical bool, col string) {
	scale := 1
	if size >= 13.5 {
		scale = 2
	}
	if scale > 1 && len([]rune(s))*6*scale > c.img.Bounds().Dx()-20 {
		scale = 1 // too wide for the image at the large size
	}
	adv := 6 * scale
	width := len([]rune(s))*adv - scale
	var dx0 int
	switch a {
	case anchorMiddle:
		dx0 = -width / 2
	case anchorEnd:
		dx0 = -width
	}
	rgba := parseColor(col)
	ox, oy := int(math.Round(x)), int(math.Round(y))
	for k, r := range []rune(s) {
		if r < 32 || r > 126 {
			r = '?'
		}
		g := font5x7[r-32]
		drop := 0
		if descends(r) {
			drop = 2
		}
		for row := range 7 {
			for bit := range 5 {
				if g[row]&(0x10>>bit) == 0 {
					continue
				}
				for sy := range scale {
					for sx := range scale {
						dx := dx0 + k*adv + bit*scale + sx
						dy := (row+drop-7)*scale + sy + 1
						if vertical {
							c.blend(ox+dy, oy-dx, rgba, 1)
						} else {
							c.blend(ox+dx, oy+dy, rgba, 1)
						}
					}
				}
			}
		}
	}
}

// parseColor understands #rgb, #rrggbb and a few names; anything else is
// black.
func parseColor(s string) color.RGBA {
	s = strings.ToLower(strings.TrimSpace(s))
	names := map[string]string{
		"black": "#000000", "white": "#ffffff", "red": "#ff0000", "green": "#008000",
		"blue": "#0000ff", "gray": "#808080", "grey": "#808080", "orange": "#ffa500",
		"purple": "#800080", "lightgray": "#d3d3d3", "lightgrey": "#d3d3d3",
	}
	if v, ok := names[s]; ok {
		s = v
	}
	if len(s) == 4 && s[0] == '#' {
		s = "#" + strings.Repeat(s[1:2], 2) + strings.Repeat(s[2:3], 2) + strings.Repeat(s[3:4], 2)
	}
	if len(s) != 7 || s[0] != '#' {
		return color.RGBA{A: 255}
	}
	v, err := strconv.ParseUint(s[1:], 16, 32)
	if err != nil {
		return color.RGBA{A: 255}
	}
	return color.RGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}
}
