package plot

import (
	"bufio"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// WriteSVG writes the figure as a standalone SVG document. Each named series
// is a group with class "series" whose title element holds its name.
func (f Figure) WriteSVG(w io.Writer) error {
	return f.render(&svgCanvas{w: bufio.NewWriter(w)}, "SVG")
}

type svgCanvas struct {
	w     *bufio.Writer
	err   error
	clips map[rectangle]string
}

func (c *svgCanvas) end() error {
	c.printf("</svg>\n")
	if c.err == nil {
		c.err = c.w.Flush()
	}
	return c.err
}

var _ canvas = (*svgCanvas)(nil)

func (c *svgCanvas) printf(format string, args ...any) {
	if c.err != nil {
		return
	}
	_, c.err = fmt.Fprintf(c.w, format, args...)
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func px1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s)) // a strings.Builder does not fail
	return b.String()
}

func (c *svgCanvas) begin(w, h float64) {
	c.printf(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	c.printf(`<svg xmlns="http://www.w3.org/2000/svg" width="%s" height="%s" viewBox="0 0 %s %s" font-family="Helvetica, Arial, sans-serif">`+"\n",
		num(w), num(h), num(w), num(h))
}

func (c *svgCanvas) rect(x, y, w, h float64, fill string, opacity float64, stroke string) {
	f := `fill="none"`
	if fill != "" {
		f = fmt.Sprintf(`fill="%s" fill-opacity="%s"`, esc(fill), num(opacity))
	}
	s := ""
	if stroke != "" {
		s = fmt.Sprintf(` stroke="%s" stroke-width="1"`, esc(stroke))
	}
	c.printf(`<rect x="%s" y="%s" width="%s" height="%s" %s%s/>`+"\n", px1(x), px1(y), px1(w), px1(h), f, s)
}

func (c *svgCanvas) line(pts []point, color string, width float64, dashed bool, clip *rectangle, name string) {
	if len(pts) == 0 {
		return
	}
	attrs := fmt.Sprintf(`fill="none" stroke="%s" stroke-width="%s" stroke-linejoin="round"`, esc(color), num(width))
	if dashed {
		attrs += ` stroke-dasharray="6 4"`
	}
	if clip != nil {
		if c.clips == nil {
			c.clips = map[rectangle]string{}
		}
		id, ok := c.clips[*clip]
		if !ok {
			id = fmt.Sprintf("clip%d", len(c.clips))
			c.clips[*clip] = id
			c.printf(`<clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`+"\n",
				id, px1(clip.x), px1(clip.y), px1(clip.w), px1(clip.h))
		}
		attrs += fmt.Sprintf(` clip-path="url(#%s)"`, id)
	}
	if name != "" {
		c.printf(`<g class="series"><title>%s</title>`, esc(name))
	}
	var b strings.Builder
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(px1(p.x))
		b.WriteByte(',')
		b.WriteString(px1(p.y))
	}
	c.printf(`<polyline points="%s" %s/>`, b.String(), attrs)
	if name != "" {
		c.printf(`</g>`)
	}
	c.printf("\n")
}

func (c *svgCanvas) text(x, y float64, s string, size float64, a anchor, vertical bool, color string) {
	anchors := [...]string{"start", "middle", "end"}
	tr := ""
	if vertical {
		tr = fmt.Sprintf(` transform="rotate(-90 %s %s)"`, px1(x), px1(y))
	}
	c.printf(`<text x="%s" y="%s" font-size="%s" text-anchor="%s" fill="%s"%s>%s</text>`+"\n",
		px1(x), px1(y), num(size), anchors[a], esc(color), tr, esc(s))
}
