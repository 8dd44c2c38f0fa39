package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"text/tabwriter"
)

func runTable(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	fs.SetOutput(stderr)
	baseline := fs.String("baseline", "engine", "label of the direct runs that added TTFT is measured over")
	ref := fs.String("ref", "nginx", "label whose CPU per request the others' is compared with, repetition by repetition")
	markdown := fs.Bool("markdown", false, "print a Markdown table")
	if err := fs.Parse(args); err != nil {
		return usage{err}
	}
	if fs.NArg() == 0 {
		return usage{errors.New("table: give the file(s) of run lines")}
	}
	var runs []Result
	for _, name := range fs.Args() {
		r, err := readRuns(name)
		if err != nil {
			return err
		}
		runs = append(runs, r...)
	}
	rows, err := Summarize(runs, *baseline, *ref)
	if err != nil {
		return err
	}
	writeTable(stdout, rows, *ref, *markdown)
	return nil
}

func readRuns(name string) ([]Result, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Result
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var r Result
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: not a run line: %w", name, line, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// Row is one label's medians over its runs.
type Row struct {
	Label              string
	Runs               int
	RPS, P50, P99      float64
	AddedP50, AddedP99 float64 // NaN for the baseline
	// OutsideP50 and OutsideP99 are the medians of the runs' percentiles of
	// TTFT minus the engine's own time to the first token, request by
	// request; AddedOutsideP99 the median over repetitions of the label's
	// OutsideP99 minus the baseline's. Stamped counts the runs that had
	// them (the engine stamped its streams); without any they are zero.
	OutsideP50, OutsideP99, AddedOutsideP99 float64
	Stamped                                 int
	CPUPerReq, EngineCPU                    float64
	// CPUVsRef is the median over repetitions of CPUPerReq over the
	// reference label's in the same repetition; NaN without one, and for
	// the baseline.
	CPUVsRef float64
	Errors   int
}

// Summarize takes the median of every figure per label, in the order labels
// first appear; added TTFT is the median over repetitions of the label's
// TTFT minus the baseline's TTFT in the same repetition, and the CPU ratio
// the median of the label's CPU per request over ref's in the same
// repetition. Pairing runs by repetition keeps a drift of the machine's
// speed between repetitions out of both.
func Summarize(runs []Result, baseline, ref string) ([]Row, error) {
	var order []string
	by := map[string][]Result{}
	for _, r := range runs {
		if _, ok := by[r.Label]; !ok {
			order = append(order, r.Label)
		}
		by[r.Label] = append(by[r.Label], r)
	}
	base, refs := map[int]Result{}, map[int]Result{}
	for _, r := range by[baseline] {
		base[r.Rep] = r
	}
	for _, r := range by[ref] {
		refs[r.Rep] = r
	}
	if len(base) == 0 {
		return nil, fmt.Errorf("no runs of the baseline %q", baseline)
	}
	var rows []Row
	for _, l := range order {
		rs := by[l]
		row := Row{Label: l, Runs: len(rs)}
		var rps, p50, p99, cpu, eng, a50, a99, ratio, o50, o99, ao99 []float64
		for _, r := range rs {
			rps, p50, p99 = append(rps, r.RPS), append(p50, r.TTFTP50), append(p99, r.TTFTP99)
			cpu, eng = append(cpu, r.CPUPerReq), append(eng, r.EngineCPU)
			row.Errors += r.Errors
			b, ok := base[r.Rep]
			if ok {
				a50, a99 = append(a50, r.TTFTP50-b.TTFTP50), append(a99, r.TTFTP99-b.TTFTP99)
			}
			if r.Stamped > 0 {
				row.Stamped++
				o50, o99 = append(o50, r.OutsideP50), append(o99, r.OutsideP99)
				if ok && b.Stamped > 0 {
					ao99 = append(ao99, r.OutsideP99-b.OutsideP99)
				}
			}
			if f, ok := refs[r.Rep]; ok && f.CPUPerReq > 0 {
				ratio = append(ratio, r.CPUPerReq/f.CPUPerReq)
			}
		}
		row.RPS, row.P50, row.P99, row.CPUPerReq, row.EngineCPU = median(rps), median(p50), median(p99), median(cpu), median(eng)
		row.AddedP50, row.AddedP99, row.CPUVsRef = median(a50), median(a99), math.NaN()
		row.OutsideP50, row.OutsideP99, row.AddedOutsideP99 = median(o50), median(o99), median(ao99)
		if len(ratio) > 0 && l != baseline { // the baseline is no proxy
			row.CPUVsRef = median(ratio)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func writeTable(w io.Writer, rows []Row, ref string, markdown bool) {
	head := []string{"target", "runs", "req/s", "TTFT p50 ms", "TTFT p99 ms", "added p50 ms", "added p99 ms",
		"outside p50 ms", "outside p99 ms", "added outside p99 ms", "proxy CPU us/req", "CPU vs " + ref, "engine CPU us/req", "errors"}
	cells := func(r Row) []string {
		ratio := "-"
		if !math.IsNaN(r.CPUVsRef) {
			ratio = fmt.Sprintf("%.2fx", r.CPUVsRef)
		}
		o50, o99, ao99 := "-", "-", "-"
		if r.Stamped > 0 {
			o50, o99, ao99 = fmt.Sprintf("%.2f", r.OutsideP50), fmt.Sprintf("%.2f", r.OutsideP99), fmt.Sprintf("%+.2f", r.AddedOutsideP99)
		}
		return []string{r.Label, fmt.Sprint(r.Runs), fmt.Sprintf("%.0f", r.RPS), fmt.Sprintf("%.2f", r.P50), fmt.Sprintf("%.2f", r.P99),
			fmt.Sprintf("%+.2f", r.AddedP50), fmt.Sprintf("%+.2f", r.AddedP99), o50, o99, ao99,
			fmt.Sprintf("%.0f", r.CPUPerReq), ratio, fmt.Sprintf("%.0f", r.EngineCPU), fmt.Sprint(r.Errors)}
	}
	if markdown {
		line := func(c []string) {
			fmt.Fprint(w, "|")
			for _, s := range c {
				fmt.Fprintf(w, " %s |", s)
			}
			fmt.Fprintln(w)
		}
		line(head)
		sep := make([]string, len(head))
		for i := range sep {
			sep[i] = "---"
		}
		line(sep)
		for _, r := range rows {
			line(cells(r))
		}
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, c := range append([][]string{head}, mapRows(rows, cells)...) {
		for _, s := range c {
			fmt.Fprintf(tw, "%s\t", s)
		}
		fmt.Fprintln(tw)
	}
	_ = tw.Flush()
}

func mapRows(rows []Row, f func(Row) []string) [][]string {
	out := make([][]string, len(rows))
	for i, r := range rows {
		out[i] = f(r)
	}
	return out
}
