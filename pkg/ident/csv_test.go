package ident

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCSVRoundTrip(t *testing.T) {
	d := stepTest(reference, 400, 1000, time.Minute, 1500*time.Millisecond, 3*time.Minute, 1, 2)
	var b bytes.Buffer
	if err := WriteCSV(&b, d); err != nil {
		t.Fatalf("WriteCSV: %v", err)
	}
	if !strings.HasPrefix(b.String(), "t_s,input,output\n") {
		t.Errorf("WriteCSV header = %q; want t_s,input,output", strings.SplitN(b.String(), "\n", 2)[0])
	}
	got, err := ReadCSV(&b)
	if err != nil {
		t.Fatalf("ReadCSV: %v", err)
	}
	if !slices.Equal(got.T, d.T) || !slices.Equal(got.U, d.U) || !slices.Equal(got.Y, d.Y) {
		t.Errorf("ReadCSV(WriteCSV(d)) differs from d")
	}
}

func TestReadCSV(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    Data
		wantErr string
	}{
		{"plain", "t_s,input,output\n0,1,2\n1,3,4\n", Data{T: []float64{0, 1}, U: []float64{1, 3}, Y: []float64{2, 4}}, ""},
		{"reordered with extra column and spaces", "output, note ,t_s, input\n2,a,0,1\n4,b,1,3\n", Data{T: []float64{0, 1}, U: []float64{1, 3}, Y: []float64{2, 4}}, ""},
		{"BOM, CRLF and comment", "\ufefft_s,input,output\r\n# warm-up\r\n0,1,2\r\n", Data{T: []float64{0}, U: []float64{1}, Y: []float64{2}}, ""},
		{"empty", "", Data{}, "empty file"},
		{"wrong header", "time,rate,cpu\n0,1,2\n", Data{}, `no column "t_s"`},
		{"duplicate column", "t_s,input,output,input\n", Data{}, "appears twice"},
		{"not a number", "t_s,input,output\n0,1,2\n1,x,4\n", Data{}, `line 3: input "x" is not a number`},
		{"NaN", "t_s,input,output\n0,1,NaN\n", Data{}, "line 2: output is \"NaN\""},
		{"Inf", "t_s,input,output\n-Inf,1,2\n", Data{}, "line 2: t_s is \"-Inf\""},
		{"short row", "t_s,input,output\n0,1\n", Data{}, "line 2: 2 fields, no output"},
		{"bad quoting", "t_s,input,output\n0,\"1,2\n", Data{}, "read step test CSV"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadCSV(strings.NewReader(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ReadCSV(%q) error = %v; want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadCSV(%q): %v", tc.in, err)
			}
			if !slices.Equal(got.T, tc.want.T) || !slices.Equal(got.U, tc.want.U) || !slices.Equal(got.Y, tc.want.Y) {
				t.Errorf("ReadCSV(%q) = %+v; want %+v", tc.in, got, tc.want)
			}
		})
	}
	_, err := ReadCSV(strings.NewReader("t_s,input,output\n0,1,nan\n"))
	if !errors.Is(err, ErrNotFinite) {
		t.Errorf("ReadCSV(nan) error = %v; want ErrNotFinite", err)
	}
}

// FuzzReadCSV checks that any input either parses into finite data of equal
// lengths, or fails with a readable error, and never panics; and that Fit on
// whatever parsed does not panic either.
func FuzzReadCSV(f *testing.F) {
	f.Add("t_s,input,output\n0,1,2\n1,3,4\n")
	f.Add("output,t_s,input\n1,0,0\n")
	f.Add("t_s,input,output\n0,1,NaN\n")
	f.Add("t_s,input,output\n0,\"1\n")
	var b bytes.Buffer
	_ = WriteCSV(&b, stepTest(reference, 400, 1000, 20*time.Second, 2*time.Second, 90*time.Second, 1, 1))
	f.Add(b.String())
	f.Fuzz(func(t *testing.T, in string) {
		d, err := ReadCSV(strings.NewReader(in))
		if err != nil {
			msg := err.Error()
			if msg == "" || !strings.Contains(msg, "CSV") {
				t.Fatalf("ReadCSV error %q does not say it is about the CSV", msg)
			}
			return
		}
		if len(d.T) != len(d.U) || len(d.T) != len(d.Y) {
			t.Fatalf("ReadCSV lengths %d, %d, %d differ", len(d.T), len(d.U), len(d.Y))
		}
		for i := range d.T {
			for _, v := range []float64{d.T[i], d.U[i], d.Y[i]} {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatalf("ReadCSV returned non-finite %v at row %d", v, i)
				}
			}
		}
		if len(d.T) <= 200 {
			if r, err := Fit(d); err == nil && (math.IsNaN(r.RMSE) || !(r.Model.Gain > 0)) {
				t.Fatalf("Fit = %+v with no error; want a finite fit with positive gain", r)
			}
		}
	})
}
