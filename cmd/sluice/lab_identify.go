package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluice-dev/sluice/internal/plot"
	"github.com/sluice-dev/sluice/internal/sim/lab"
	"github.com/sluice-dev/sluice/pkg/ident"
)

func runLabIdentify(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sluice lab identify", "sluice lab identify --csv FILE [--json] [--plot FILE.svg|FILE.png]",
		"Fit a first-order-plus-dead-time model (gain, time constant, dead time, base load)\n"+
			"to an open-loop step test by least squares, starting from Smith's two-point estimate.\n"+
			"The CSV has a header t_s,input,output: time in seconds (strictly increasing),\n"+
			"input the rate in messages/s (held until the next row, one step), output the CPU in percent.")
	csvPath := fs.String("csv", "", "step test CSV file with header t_s,input,output ('-' for standard input)")
	asJSON := fs.Bool("json", false, `print {"model":{"gain","tau_s","dead_time_s","base"},"rmse"} as JSON; gain in points of CPU per message/s, base and rmse in points`)
	plotPath := fs.String("plot", "", "write a plot of the data and the fitted model to this file (.svg or .png)")
	if code, done := flagsOrExit(fs, args, stdout, stderr); done {
		return code
	}
	if *csvPath == "" {
		fmt.Fprintln(stderr, "sluice lab identify: --csv FILE is required")
		return 2
	}
	if badPlotPath("sluice lab identify", *plotPath, stderr) {
		return 2
	}
	var in io.Reader = os.Stdin
	if *csvPath != "-" {
		f, err := os.Open(*csvPath)
		if err != nil {
			return fail(stderr, "sluice lab identify", err, 2)
		}
		defer f.Close()
		in = f
	}
	d, err := ident.ReadCSV(in)
	if err != nil {
		fmt.Fprintf(stderr, "sluice lab identify: %s: %v\n", *csvPath, err)
		return 2
	}
	return identifyAndReport("sluice lab identify", *csvPath, d, *asJSON, *plotPath, stdout, stderr)
}

// identifyAndReport fits d and prints the result; source names the data in
// messages and in the plot's title.
func identifyAndReport(cmd, source string, d ident.Data, asJSON bool, plotPath string, stdout, stderr io.Writer) int {
	r, err := ident.Fit(d)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %s: %v\n", cmd, source, err)
		if errors.Is(err, ident.ErrNoStep) || errors.Is(err, ident.ErrTimeOrder) || errors.Is(err, ident.ErrNotFinite) ||
			errors.Is(err, ident.ErrTooFewSamples) || errors.Is(err, ident.ErrNoResponse) {
			return 2
		}
		return 1
	}
	if plotPath != "" {
		if err := lab.IdentifyFigure(source, d, r).WriteFile(plotPath); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
			return 1
		}
	}
	if asJSON {
		return printJSON(stdout, stderr, lab.FitOf(r))
	}
	m := r.Model
	fmt.Fprintf(stdout, "identified from %d samples of %s:\n", d.Len(), source)
	fmt.Fprintf(stdout, "  gain       %.6g points of CPU per message/s\n", m.Gain)
	fmt.Fprintf(stdout, "  tau        %v\n", m.Tau.Round(10*time.Millisecond))
	fmt.Fprintf(stdout, "  dead time  %v\n", m.DeadTime.Round(10*time.Millisecond))
	fmt.Fprintf(stdout, "  base       %.4g %% CPU at zero rate\n", m.Base)
	fmt.Fprintf(stdout, "  rmse       %.4g points\n", r.RMSE)
	g := r.Guess
	fmt.Fprintf(stdout, "  (two-point start: gain %.4g, tau %v, dead time %v)\n", g.Gain, g.Tau.Round(10*time.Millisecond), g.DeadTime.Round(10*time.Millisecond))
	if plotPath != "" {
		fmt.Fprintf(stdout, "plot: %s\n", plotPath)
	}
	return 0
}

// badPlotPath tells on stderr, and says, that --plot names a file the
// plotting package cannot write (by its extension); an empty one is fine.
func badPlotPath(name, path string, stderr io.Writer) bool {
	if path == "" {
		return false
	}
	if err := plot.CheckPath(path); err != nil {
		fmt.Fprintf(stderr, "%s: --plot: %v\n", name, err)
		return true
	}
	return false
}
