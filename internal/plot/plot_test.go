package plot

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() Figure {
	var x, cpu, meas, rate []float64
	for i := 0; i <= 3600; i++ {
		t := float64(i) / 60
		x = append(x, t)
		cpu = append(cpu, 70-60*math.Exp(-t/5))
		m := math.NaN() // the metric is missing for the first 3 minutes
		if t >= 3 {
			m = 70 - 60*math.Exp(-(t-3)/5)
		}
		meas = append(meas, m)
		rate = append(rate, 1200*(1-math.Exp(-t/5)))
	}
	return Figure{
		Title:  "pi & pid <reference>",
		XLabel: "time (min)",
		Panels: []Panel{
			{
				Title:  "CPU",
				YLabel: "CPU (%)",
				YMin:   0, YMax: 100,
				Series: []Series{
					{Name: "setpoint", X: []float64{0, 60}, Y: []float64{70, 70}, Dashed: true, Color: "#000000"},
					{Name: "pi true CPU", X: x, Y: cpu},
					{Name: "pi measured CPU", X: x, Y: meas},
				},
				Shades: []Shade{{From: 0, To: 3, Label: "stale metric"}},
			},
			{
				Title:  "Allowed rate",
				YLabel: "rate (msg/s)",
				Series: []Series{{Name: "pi", X: x, Y: rate}},
			},
		},
	}
}

// svgDoc is the part of an SVG document the tests look at.
type svgDoc struct {
	XMLName xml.Name `xml:"svg"`
	Groups  []struct {
		Class    string `xml:"class,attr"`
		Title    string `xml:"title"`
		Polyline struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
	} `xml:"g"`
	Texts []string `xml:"text"`
	Rects []struct {
		Fill string `xml:"fill,attr"`
	} `xml:"rect"`
}

func TestWriteSVG(t *testing.T) {
	var b bytes.Buffer
	if err := sample().WriteSVG(&b); err != nil {
		t.Fatalf("WriteSVG: %v", err)
	}
	// Well-formed XML all the way through.
	dec := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	for {
		_, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("WriteSVG output is not well-formed XML: %v", err)
		}
	}
	var doc svgDoc
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("xml.Unmarshal: %v", err)
	}
	series := map[string]int{}
	for _, g := range doc.Groups {
		if g.Class == "series" {
			series[g.Title]++
			if strings.Count(g.Polyline.Points, ",") < 2 {
				t.Errorf("series %q polyline has points %q; want a line", g.Title, g.Polyline.Points)
			}
		}
	}
	for _, name := range []string{"setpoint", "pi true CPU", "pi measured CPU", "pi"} {
		if series[name] != 1 {
			t.Errorf("SVG has %d polylines for series %q; want 1 (series: %v)", series[name], name, series)
		}
	}
	texts := strings.Join(doc.Texts, "|")
	for _, want := range []string{"pi & pid <reference>", "CPU (%)", "rate (msg/s)", "time (min)", "stale metric", "pi measured CPU", "100", "1000"} {
		if !strings.Contains(texts, want) {
			t.Errorf("SVG texts %q; want %q among them", texts, want)
		}
	}
}

func TestThinKeepsExtremes(t *testing.T) {
	var pts []point
	for i := range 1000 {
		y := 50.0
		if i == 437 {
			y = 3 // a spike that must survive thinning
		}
		pts = append(pts, point{x: 100 + float64(i)/100, y: y})
	}
	got := thin(pts)
	if len(got) > 40 {
		t.Errorf("thin(1000 points over 10 columns) kept %d; want at most 40", len(got))
	}
	found := false
	for _, p := range got {
		found = found || p.y == 3
	}
	if !found {
		t.Errorf("thin dropped the spike")
	}
}

func TestTicks(t *testing.T) {
	tests := []struct {
		lo, hi float64
		n      int
		want   string
	}{
		{0, 100, 5, "0 20 40 60 80 100"},
		{0, 180, 4, "0 50 100 150"},
		{-0.3, 0.3, 3, "-0.2 0.0 0.2"},
		{1180, 1260, 4, "1180 1200 1220 1240 1260"},
		{0, 7.5, 2, "0.0 2.5 5.0 7.5"},
		{0, 1, 2, "0.0 0.5 1.0"},
	}
	for _, tc := range tests {
		ts := ticks(tc.lo, tc.hi, tc.n)
		var s []string
		for _, v := range ts.values {
			s = append(s, ts.format(v))
		}
		if got := strings.Join(s, " "); got != tc.want {
			t.Errorf("ticks(%v, %v, %d) = %q; want %q", tc.lo, tc.hi, tc.n, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	f := Figure{Panels: []Panel{{Series: []Series{{Name: "a", X: []float64{1, 2}, Y: []float64{1}}}}}}
	if err := f.WriteSVG(io.Discard); err == nil || !strings.Contains(err.Error(), "2 x values and 1 y values") {
		t.Errorf("WriteSVG(mismatched series) error = %v; want a length mismatch", err)
	}
	if err := (Figure{}).WriteSVG(io.Discard); err == nil {
		t.Errorf("WriteSVG(no panels) succeeded; want an error")
	}
	if err := sample().WriteFile(filepath.Join(t.TempDir(), "x.pdf")); err == nil || !strings.Contains(err.Error(), ".svg or .png") {
		t.Errorf("WriteFile(x.pdf) error = %v; want one naming the formats", err)
	}
}

// WriteFile writes the format the file's extension names, whatever its
// case.
func TestWriteFile(t *testing.T) {
	for name, check := range map[string]func(b []byte) error{
		"fig.svg": func(b []byte) error {
			if !bytes.Contains(b, []byte("<svg")) || !bytes.HasSuffix(b, []byte("</svg>\n")) {
				return fmt.Errorf("%d bytes that are not a whole SVG", len(b))
			}
			return nil
		},
		"fig.PNG": func(b []byte) error {
			_, err := png.Decode(bytes.NewReader(b))
			return err
		},
	} {
		path := filepath.Join(t.TempDir(), name)
		if err := sample().WriteFile(path); err != nil {
			t.Fatalf("WriteFile: %v", err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := check(b); err != nil {
			t.Errorf("WriteFile(%s) did not write its format: %v", path, err)
		}
	}
}
