// Command report turns `go test -bench` output into one JSON object, with the
// ratios that matter computed against a baseline measured in the same run,
// and merges the JSON results of other benchmark programs
// (bench-controller, bench-consumers). `make bench` prints its output as the
// last line.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// result is one benchmark line.
type result struct {
	Name     string  `json:"name"`
	N        int64   `json:"n"`
	NsOp     float64 `json:"ns_op"`
	BytesOp  float64 `json:"bytes_op"`
	AllocsOp float64 `json:"allocs_op"`
}

var line = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+(\d+)\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op)?(?:\s+([\d.]+) allocs/op)?`)

// parse reads benchmark lines, keyed by name (without the GOMAXPROCS suffix).
func parse(r io.Reader) (map[string]result, []string, error) {
	out := map[string]result{}
	var order []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		res := result{Name: m[1]}
		res.N, _ = strconv.ParseInt(m[2], 10, 64)
		res.NsOp, _ = strconv.ParseFloat(m[3], 64)
		if m[4] != "" {
			res.BytesOp, _ = strconv.ParseFloat(m[4], 64)
		}
		if m[5] != "" {
			res.AllocsOp, _ = strconv.ParseFloat(m[5], 64)
		}
		if _, dup := out[res.Name]; !dup {
			order = append(order, res.Name)
		}
		out[res.Name] = res
	}
	return out, order, sc.Err()
}

// ratio is a/b of two benchmarks' ns/op, nil when either is missing.
func ratio(r map[string]result, a, b string) any {
	x, okx := r[a]
	y, oky := r[b]
	if !okx || !oky || y.NsOp == 0 {
		return nil
	}
	return x.NsOp / y.NsOp
}

// lastJSON returns the last line of path that parses as a JSON object.
func lastJSON(path string) (any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var v map[string]any
		if json.Unmarshal([]byte(lines[i]), &v) == nil {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%s: no JSON object", path)
}

type jsonFlags map[string]string

func (j jsonFlags) String() string { return fmt.Sprint(map[string]string(j)) }

func (j jsonFlags) Set(v string) error {
	name, path, ok := strings.Cut(v, "=")
	if !ok || name == "" || path == "" {
		return fmt.Errorf("want NAME=FILE, got %q", v)
	}
	j[name] = path
	return nil
}

func main() {
	goOut := flag.String("go", "-", "file with `go test -bench` output (- for stdin)")
	others := jsonFlags{}
	flag.Var(others, "json", "NAME=FILE: merge the last JSON line of FILE under NAME (repeatable)")
	flag.Parse()

	in := io.Reader(os.Stdin)
	if *goOut != "-" {
		f, err := os.Open(*goOut)
		if err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	res, order, err := parse(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	list := make([]result, 0, len(order))
	for _, n := range order {
		list = append(list, res[n])
	}
	out := map[string]any{
		"benchmarks": list,
		// Ratios against a baseline measured in the same run.
		"ratios": map[string]any{
			// cost of one update of the thesis's controller and of the
			// Smith predictor, relative to a plain PI
			"control_pi_aw_spf_ff_over_pi": ratio(res, "BenchmarkUpdate/pi-aw-spf-ff", "BenchmarkUpdate/pi"),
			"control_smith_over_pi":        ratio(res, "BenchmarkUpdate/smith", "BenchmarkUpdate/pi"),
			// cost of pacing one batch at an unlimited rate relative to
			// the same batch unpaced (the consumer's overhead)
			"consume_paced_over_unpaced": ratio(res, "BenchmarkProcess/paced-unlimited", "BenchmarkProcess/unpaced"),
			// the consumer's inner loop: a batch through Process with it
			// relative to the pacer alone, and one inner-loop step (a Pace
			// and an Observe, learning or cutting) relative to one pacer
			// reservation of the batch
			"consume_inner_over_pacer":            ratio(res, "BenchmarkInnerLoop/pacer+inner", "BenchmarkInnerLoop/pacer"),
			"consume_inner_step_over_reservation": ratio(res, "BenchmarkInnerStep/inner", "BenchmarkInnerStep/pacer"),
			"consume_inner_cut_over_reservation":  ratio(res, "BenchmarkInnerStep/inner-cutting", "BenchmarkInnerStep/pacer"),
			// one tick of 1,000 loops relative to one tick of one loop
			// (1000 means linear scaling)
			"tick_1000_loops_over_1_loop": ratio(res, "BenchmarkTick/loops=1000", "BenchmarkTick/loops=1"),
		},
	}
	for name, path := range others {
		v, err := lastJSON(path)
		if err != nil {
			out[name] = map[string]any{"error": err.Error()}
			continue
		}
		out[name] = v
	}
	b, err := json.Marshal(out)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	fmt.Println(string(b))
}
