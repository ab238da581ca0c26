package ident

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// CSV column names. The header must name all three, in any order; other
// columns are ignored.
const (
	ColumnTime   = "t_s"
	ColumnInput  = "input"
	ColumnOutput = "output"
)

// ReadCSV reads a step test from CSV with a header row naming the columns
// t_s (seconds), input (messages/s) and output (percent CPU). It checks the
// syntax and that every value is a finite number; call Data.Validate (or Fit)
// for the rest.
func ReadCSV(r io.Reader) (Data, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return Data{}, fmt.Errorf("read step test CSV: empty file, want a header %s,%s,%s", ColumnTime, ColumnInput, ColumnOutput)
	}
	if err != nil {
		return Data{}, fmt.Errorf("read step test CSV header: %w", err)
	}
	col := map[string]int{ColumnTime: -1, ColumnInput: -1, ColumnOutput: -1}
	for i, h := range header {
		h = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
		if j, ok := col[h]; ok {
			if j >= 0 {
				return Data{}, fmt.Errorf("read step test CSV header: column %q appears twice", h)
			}
			col[h] = i
		}
	}
	for _, name := range []string{ColumnTime, ColumnInput, ColumnOutput} {
		if col[name] < 0 {
			return Data{}, fmt.Errorf("read step test CSV header %q: no column %q, want %s,%s,%s",
				strings.Join(header, ","), name, ColumnTime, ColumnInput, ColumnOutput)
		}
	}
	var d Data
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Data{}, fmt.Errorf("read step test CSV: %w", err)
		}
		line, _ := cr.FieldPos(0)
		var v [3]float64
		for k, name := range []string{ColumnTime, ColumnInput, ColumnOutput} {
			i := col[name]
			if i >= len(rec) {
				return Data{}, fmt.Errorf("read step test CSV line %d: %d fields, no %s", line, len(rec), name)
			}
			f, err := strconv.ParseFloat(strings.TrimSpace(rec[i]), 64)
			if err != nil {
				return Data{}, fmt.Errorf("read step test CSV line %d: %s %q is not a number", line, name, rec[i])
			}
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return Data{}, fmt.Errorf("read step test CSV line %d: %s is %q: %w", line, name, rec[i], ErrNotFinite)
			}
			v[k] = f
		}
		d.T = append(d.T, v[0])
		d.U = append(d.U, v[1])
		d.Y = append(d.Y, v[2])
	}
	return d, nil
}

// WriteCSV writes d as CSV with the header t_s,input,output, in a form that
// ReadCSV reads back exactly.
func WriteCSV(w io.Writer, d Data) error {
	cw := csv.NewWriter(w)
	if err := cw.Write([]string{ColumnTime, ColumnInput, ColumnOutput}); err != nil {
		return fmt.Errorf("write step test CSV: %w", err)
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for i := range d.T {
		if err := cw.Write([]string{f(d.T[i]), f(d.U[i]), f(d.Y[i])}); err != nil {
			return fmt.Errorf("write step test CSV: %w", err)
		}
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write step test CSV: %w", err)
	}
	return nil
}
