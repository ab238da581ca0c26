package plot

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// countColor counts the pixels within tol of want in every channel.
func countColor(img image.Image, want color.RGBA, tol int) int {
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			near := func(a uint32, b uint8) bool { d := int(a>>8) - int(b); return d > -tol && d < tol }
			if near(r, want.R) && near(g, want.G) && near(bl, want.B) {
				n++
			}
		}
	}
	return n
}

func TestWritePNG(t *testing.T) {
	f := sample()
	var b bytes.Buffer
	if err := f.WritePNG(&b); err != nil {
		t.Fatalf("WritePNG: %v", err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatalf("png.Decode: %v", err)
	}
	w, h, _ := f.size()
	if got := img.Bounds().Size(); got.X != int(w) || got.Y != int(h) {
		t.Errorf("PNG size %v; want %vx%v", got, w, h)
	}
	// Every series is drawn in its color: the palette's blue (pi rate),
	// orange (true CPU) and green (measured CPU), and the black setpoint.
	for name, c := range map[string]string{"pi rate": palette[0], "true CPU": palette[1], "measured CPU": palette[2], "setpoint": "#000000"} {
		if n := countColor(img, parseColor(c), 70); n < 50 {
			t.Errorf("PNG has %d pixels of %s (%s); want a line", n, name, c)
		}
	}
	// Removing a series removes its pixels.
	if n := countColor(img, parseColor(palette[2]), 8); n == 0 {
		t.Fatalf("PNG has no pixel of the measured series' exact color")
	}
	f.Panels[0].Series = f.Panels[0].Series[:2]
	b.Reset()
	if err := f.WritePNG(&b); err != nil {
		t.Fatal(err)
	}
	img, err = png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if n := countColor(img, parseColor(palette[2]), 8); n != 0 {
		t.Errorf("PNG without the measured series has %d pixels of its color; want 0", n)
	}
}

func TestParseColor(t *testing.T) {
	tests := map[string]color.RGBA{
		"#1f77b4": {0x1f, 0x77, 0xb4, 255},
		"#fff":    {255, 255, 255, 255},
		"Red":     {255, 0, 0, 255},
		"bogus":   {0, 0, 0, 255},
		"#12345z": {0, 0, 0, 255},
	}
	for in, want := range tests {
		if got := parseColor(in); got != want {
			t.Errorf("parseColor(%q) = %v; want %v", in, got, want)
		}
	}
}

func TestFontCoversASCII(t *testing.T) {
	// Every printable character but space has ink, and no two glyphs are
	// the same.
	seen := map[[7]uint8]rune{}
	for i, g := range font5x7 {
		r := rune(32 + i)
		if r != ' ' && g == ([7]uint8{}) {
			t.Errorf("glyph %q is blank", r)
		}
		if prev, ok := seen[g]; ok {
			t.Errorf("glyphs %q and %q are the same", prev, r)
		}
		seen[g] = r
	}
}
