package plot

import (
	"errors"
	"io"
)

// WritePNG writes the figure as a PNG image.
func (f Figure) WritePNG(w io.Writer) error {
	if err := f.Validate(); err != nil {
		return err
	}
	return errors.New("write PNG: not implemented yet, use .svg")
}
