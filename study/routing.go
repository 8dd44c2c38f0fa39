package study

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/report"
	"github.com/stargate-llm/stargate/sim"
)

// RoutingOptions choose how much of the routing study to run.
type RoutingOptions struct {
	// Quick runs one seed at one rate per fleet with 150 s of warm-up (sessions
	// last about 170 s, so less would measure a fleet still filling up) and 60 s
	// measured.
	Quick    bool
	Parallel int
	Progress Progress
	// Policies, when set, replace RoutingPolicies: a smaller sweep.
	Policies []string
	// Warmup and Measure, when > 0, replace the study's windows.
	Warmup, Measure time.Duration
	// Sweep, if set, adds the rate sweep (see SweepOptions) to the study.
	Sweep *SweepOptions
}

// RoutingPolicies are the policies of the routing study, in report order.
var RoutingPolicies = []string{"pulsar-waw", "waw", "pulsar-waw-tps", "least-request", "power-of-two", "round-robin", "random"}

// RoutingSpecs expands the routing study into runs.
func RoutingSpecs(opts RoutingOptions) ([]RunSpec, error) {
	rates := map[string][]float64{"hetero": {350, 450}, "homo": {450, 550}}
	seeds := []uint64{1, 2, 3}
	warmup, measure := 240*time.Second, 240*time.Second
	if opts.Quick {
		rates = map[string][]float64{"hetero": {450}, "homo": {450}}
		seeds = []uint64{1}
		warmup, measure = 150*time.Second, 60*time.Second
	}
	if opts.Warmup > 0 {
		warmup = opts.Warmup
	}
	if opts.Measure > 0 {
		measure = opts.Measure
	}
	policies := RoutingPolicies
	if len(opts.Policies) > 0 {
		policies = opts.Policies
	}
	var specs []RunSpec
	for _, name := range []string{"hetero", "homo"} {
		fleet, ok := config.Preset(name)
		if !ok {
			return nil, fmt.Errorf("study: no preset fleet %q", name)
		}
		for _, rps := range rates[name] {
			for _, pol := range policies {
				for _, seed := range seeds {
					specs = append(specs, RunSpec{FleetName: name, Fleet: fleet, Policy: pol, RPS: rps, Seed: seed,
						Warmup: warmup, Measure: measure})
				}
			}
		}
	}
	return specs, nil
}

// Routing runs the routing study.
func Routing(ctx context.Context, reg *policy.Registry, opts RoutingOptions) (*Results, error) {
	specs, err := RoutingSpecs(opts)
	if err != nil {
		return nil, err
	}
	n := len(specs)
	if opts.Sweep != nil {
		sweep, err := opts.Sweep.Specs()
		if err != nil {
			return nil, err
		}
		specs = append(specs, sweep...)
	}
	runs, err := RunAll(ctx, specs, reg, opts.Parallel, opts.Progress)
	if err != nil {
		return nil, err
	}
	res := &Results{Study: "routing", Quick: opts.Quick, Runs: runs[:n:n]}
	if len(runs) > n {
		res.Sweep = runs[n:]
	}
	return res, nil
}

// Results are a study's runs and what they add up to.
type Results struct {
	Study string      `json:"study"`
	Quick bool        `json:"quick,omitempty"`
	Runs  []RunResult `json:"runs"`
	// Sweep holds the routing study's rate sweep, when it was run.
	Sweep []RunResult `json:"sweep,omitempty"`
}

// Cell aggregates the seeds of one fleet, rate and policy.
type Cell struct {
	Fleet, Policy                 string
	RPS                           float64
	Seeds                         int
	Offered                       float64
	Goodput, GoodputLo, GoodputHi float64
	SLO, Reuse, P50, P99          float64
	// Turns, Failures and Rejections are means over seeds too.
	Turns, Failures, Rejections float64
	// ReqCoV is the coefficient of variation of requests received per
	// backend (mean over seeds); PeakLo-PeakHi and MaxLo-MaxHi span every
	// backend's peak and maximum input TPS per GPU over seeds (see Balance).
	ReqCoV, PeakLo, PeakHi, MaxLo, MaxHi float64
}

// Cells averages runs over seeds, in run order.
func (r *Results) Cells() []Cell {
	var cells []Cell
	index := map[string]int{}
	for _, run := range r.Runs {
		key := run.Fleet + "\x00" + run.Policy + "\x00" + strconv.FormatFloat(run.RPS, 'g', -1, 64)
		i, ok := index[key]
		if !ok {
			i = len(cells)
			index[key] = i
			cells = append(cells, Cell{Fleet: run.Fleet, Policy: run.Policy, RPS: run.RPS,
				GoodputLo: run.GoodputRPS, GoodputHi: run.GoodputRPS,
				PeakLo: math.Inf(1), PeakHi: math.Inf(-1), MaxLo: math.Inf(1), MaxHi: math.Inf(-1)})
		}
		c := &cells[i]
		c.Seeds++
		c.Offered += run.OfferedRPS
		c.Goodput += run.GoodputRPS
		c.GoodputLo, c.GoodputHi = min(c.GoodputLo, run.GoodputRPS), max(c.GoodputHi, run.GoodputRPS)
		c.SLO += run.SLOPct
		c.Reuse += run.ReusePct
		c.P50 += run.TTFTP50S
		c.P99 += run.TTFTP99S
		c.Turns += float64(run.Turns)
		c.Failures += float64(run.Failures)
		c.Rejections += float64(run.Rejections)
		c.ReqCoV += requestCoV(run.Backends)
		for _, b := range run.Backends {
			if b.Workers > 0 {
				peak, mx := b.PeakInputTPS/float64(b.Workers), b.MaxInputTPS/float64(b.Workers)
				c.PeakLo, c.PeakHi = min(c.PeakLo, peak), max(c.PeakHi, peak)
				c.MaxLo, c.MaxHi = min(c.MaxLo, mx), max(c.MaxHi, mx)
			}
		}
	}
	for i := range cells {
		c := &cells[i]
		n := float64(c.Seeds)
		c.Offered, c.Goodput, c.SLO, c.Reuse, c.P50, c.P99 = c.Offered/n, c.Goodput/n, c.SLO/n, c.Reuse/n, c.P50/n, c.P99/n
		c.Turns, c.Failures, c.Rejections = c.Turns/n, c.Failures/n, c.Rejections/n
		c.ReqCoV /= n
		if math.IsInf(c.PeakLo, 1) {
			c.PeakLo, c.PeakHi, c.MaxLo, c.MaxHi = 0, 0, 0, 0
		}
	}
	return cells
}

// requestCoV is the coefficient of variation (population standard deviation
// over mean) of the requests each backend's gateway received over the run.
func requestCoV(backends []sim.BackendResult) float64 {
	if len(backends) == 0 {
		return 0
	}
	var sum, sq float64
	for _, b := range backends {
		sum += float64(b.GatewayReceived)
	}
	mean := sum / float64(len(backends))
	if mean == 0 {
		return 0
	}
	for _, b := range backends {
		d := float64(b.GatewayReceived) - mean
		sq += d * d
	}
	return math.Sqrt(sq/float64(len(backends))) / mean
}

// BalanceTable shows how evenly each cell spread its load: the coefficient
// of variation of requests per backend, and the spread over backends of the
// peak input TPS each served and of the maximum input TPS pulsar-waw-tps
// weights by, both per GPU in thousands of tokens/s.
func (r *Results) BalanceTable() report.Table {
	t := report.Table{Title: "load balance (request CoV: mean over seeds; TPS per GPU: range over backends and seeds, k tokens/s)",
		Headers: []string{"fleet", "rps", "policy", "request CoV", "peak input TPS/GPU", "max input TPS/GPU"}}
	for _, c := range r.Cells() {
		t.Rows = append(t.Rows, []string{c.Fleet, f0(c.RPS), c.Policy, f2(c.ReqCoV),
			f0(c.PeakLo/1000) + "-" + f0(c.PeakHi/1000), f0(c.MaxLo/1000) + "-" + f0(c.MaxHi/1000)})
	}
	return t
}

// Table is the study's summary table, means over seeds.
func (r *Results) Table() report.Table {
	t := report.Table{Title: fmt.Sprintf("%s study (means over seeds; goodput range over seeds)", r.Study),
		Headers: []string{"fleet", "rps", "policy", "seeds", "offered", "goodput", "range", "slo%", "reuse%", "p50 s", "p99 s", "turns", "failures", "rejections"}}
	for _, c := range r.Cells() {
		t.Rows = append(t.Rows, []string{c.Fleet, f0(c.RPS), c.Policy, strconv.Itoa(c.Seeds), f1(c.Offered), f1(c.Goodput),
			f1(c.GoodputLo) + "-" + f1(c.GoodputHi), f1(c.SLO), f1(c.Reuse), f2(c.P50), f2(c.P99),
			f0(c.Turns), f0(c.Failures), f0(c.Rejections)})
	}
	return t
}

// RunsTable has one row per run, with a class column when some run has a
// workload class.
func RunsTable(runs []RunResult) report.Table {
	classes := slices.ContainsFunc(runs, func(r RunResult) bool { return r.Class != "" })
	t := report.Table{Headers: []string{"fleet", "policy", "rps", "seed", "engine", "offered", "goodput", "slo%", "reuse%",
		"p50 s", "p99 s", "turns", "failures", "rejections", "wall s"}}
	if classes {
		t.Headers = slices.Insert(t.Headers, 1, "class")
	}
	// A run on engines with a host KV tier adds the host's share of reuse%.
	host := slices.ContainsFunc(runs, func(r RunResult) bool { return r.HostReusePct > 0 })
	if host {
		t.Headers = slices.Insert(t.Headers, 9, "host%")
	}
	for _, r := range runs {
		row := []string{r.Fleet, r.Policy, f0(r.RPS), strconv.FormatUint(r.Seed, 10), r.Engine,
			f1(r.OfferedRPS), f1(r.GoodputRPS), f1(r.SLOPct), f1(r.ReusePct), f2(r.TTFTP50S), f2(r.TTFTP99S),
			strconv.Itoa(r.Turns), strconv.Itoa(r.Failures), strconv.Itoa(r.Rejections), f2(r.WallS)}
		if host {
			row = slices.Insert(row, 9, f1(r.HostReusePct))
		}
		if classes {
			row = slices.Insert(row, 1, r.Class)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f2(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// WriteJSON writes the results as one JSON object.
func (r *Results) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Findings compares pulsar-waw with waw in every fleet and rate, in words.
func (r *Results) Findings() []string {
	cells := r.Cells()
	find := func(fleet, pol string, rps float64) *Cell {
		for i := range cells {
			if cells[i].Fleet == fleet && cells[i].Policy == pol && cells[i].RPS == rps {
				return &cells[i]
			}
		}
		return nil
	}
	var out []string
	for _, c := range cells {
		if c.Policy != "pulsar-waw" {
			continue
		}
		w := find(c.Fleet, "waw", c.RPS)
		if w == nil || w.Goodput == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s at %s req/s: pulsar-waw goodput %.1f vs waw %.1f req/s (%+.1f%%); SLO %.1f%% vs %.1f%%; reuse %.1f%% vs %.1f%%; TTFT p99 %.2f s vs %.2f s.",
			c.Fleet, f0(c.RPS), c.Goodput, w.Goodput, 100*(c.Goodput/w.Goodput-1), c.SLO, w.SLO, c.Reuse, w.Reuse, c.P99, w.P99))
	}
	return out
}

// WriteHTML writes a self-contained report with charts.
func (r *Results) WriteHTML(w io.Writer) error {
	p := report.NewPage(fmt.Sprintf("Stargate %s study", r.Study))
	p.Paragraph("Simulated with the same cores the live services run. Goodput is good turns (completed with TTFT within the SLO) per second of the measured window; bars show the mean over seeds and whiskers the range.")
	if r.Quick {
		p.Paragraph("Quick run: one seed, one rate per fleet, 150 s warm-up and 60 s measured. Figures are indicative only.")
	}
	p.Heading("Findings")
	for _, f := range r.Findings() {
		p.Paragraph(f)
	}
	cells := r.Cells()
	for _, fleet := range r.fleetNames() {
		p.Heading("Fleet " + fleet)
		p.Chart(goodputChart(fleet, cells).SVG())
		p.Chart(r.backendChart(fleet).SVG())
		for _, note := range r.idleBackends(fleet) {
			p.Paragraph(note)
		}
	}
	r.writeSweepHTML(p)
	p.Heading("All cells")
	p.Table(r.Table())
	p.Heading("Load balance")
	p.Paragraph("Request CoV is the coefficient of variation of the requests each backend's gateway received over the run. Peak input TPS is the highest input tokens/s a backend served (largest rate of its 5, 20 and 60 s windows); maximum input TPS is what pulsar-waw-tps weights by: input tokens per engine-slot second over the 60 s fallback window times the backend's slots. Both per GPU.")
	p.Table(r.BalanceTable())
	return p.Write(w)
}

func (r *Results) fleetNames() []string {
	var names []string
	for _, run := range r.Runs {
		if !slices.Contains(names, run.Fleet) {
			names = append(names, run.Fleet)
		}
	}
	return names
}

func goodputChart(fleet string, cells []Cell) report.BarChart {
	ch := report.BarChart{Title: "Goodput by policy and offered rate, " + fleet, XLabel: "nominal rate (req/s)", YLabel: "goodput (req/s)"}
	var rates []float64
	var pols []string
	for _, c := range cells {
		if c.Fleet != fleet {
			continue
		}
		if !slices.Contains(rates, c.RPS) {
			rates = append(rates, c.RPS)
		}
		if !slices.Contains(pols, c.Policy) {
			pols = append(pols, c.Policy)
		}
	}
	slices.Sort(rates)
	for _, rps := range rates {
		ch.Categories = append(ch.Categories, f0(rps))
	}
	for _, pol := range pols {
		s := report.BarSeries{Name: pol}
		for _, rps := range rates {
			bar := report.Bar{}
			for _, c := range cells {
				if c.Fleet == fleet && c.Policy == pol && c.RPS == rps {
					bar = report.Bar{Value: c.Goodput, Lo: c.GoodputLo, Hi: c.GoodputHi, HasRange: c.Seeds > 1}
				}
			}
			s.Bars = append(s.Bars, bar)
		}
		ch.Series = append(ch.Series, s)
	}
	return ch
}

// backendPolicies are the policies the per-backend views show.
var backendPolicies = []string{"pulsar-waw", "waw", "least-request"}

// topRate is the highest rate run on a fleet.
func (r *Results) topRate(fleet string) float64 {
	top := 0.0
	for _, run := range r.Runs {
		if run.Fleet == fleet {
			top = max(top, run.RPS)
		}
	}
	return top
}

// backendChart plots each backend's TTFT p50 against its GPU count at the
// fleet's highest rate, averaged over seeds, for the two affinity policies.
func (r *Results) backendChart(fleet string) report.ScatterChart {
	top := r.topRate(fleet)
	ch := report.ScatterChart{Title: fmt.Sprintf("Per-backend TTFT p50 against GPUs, %s at %s req/s", fleet, f0(top)),
		XLabel: "GPUs in the backend", YLabel: "TTFT p50 (s)", LogY: true}
	for _, pol := range backendPolicies {
		type acc struct {
			gpus int
			sum  float64
			n    int
		}
		var accs []acc
		for _, run := range r.Runs {
			if run.Fleet != fleet || run.Policy != pol || run.RPS != top {
				continue
			}
			if accs == nil {
				accs = make([]acc, len(run.Backends))
			}
			for i, b := range run.Backends {
				accs[i].gpus = b.Workers
				if b.Completed > 0 {
					accs[i].sum += b.TTFTP50S
					accs[i].n++
				}
			}
		}
		if accs == nil {
			continue
		}
		s := report.ScatterSeries{Name: pol}
		for _, a := range accs {
			if a.n > 0 {
				s.Points = append(s.Points, report.Point{X: float64(a.gpus), Y: a.sum / float64(a.n)})
			}
		}
		slices.SortStableFunc(s.Points, func(a, b report.Point) int { return cmp.Compare(a.X, b.X) })
		ch.Series = append(ch.Series, s)
	}
	return ch
}

// idleBackends names, per policy, the backends that completed no turn in any
// seed at the fleet's highest rate: the scatter chart cannot show them.
func (r *Results) idleBackends(fleet string) []string {
	top := r.topRate(fleet)
	var notes []string
	for _, pol := range backendPolicies {
		var completed []int
		var backends []sim.BackendResult
		for _, run := range r.Runs {
			if run.Fleet != fleet || run.Policy != pol || run.RPS != top {
				continue
			}
			if completed == nil {
				completed = make([]int, len(run.Backends))
				backends = run.Backends
			}
			for i, b := range run.Backends {
				completed[i] += b.Completed
			}
		}
		var idle []string
		for i, n := range completed {
			if n == 0 {
				idle = append(idle, fmt.Sprintf("%s (%d GPUs)", backends[i].Name, backends[i].Workers))
			}
		}
		if len(idle) > 0 {
			notes = append(notes, fmt.Sprintf("Not plotted: under %s at %s req/s these backends completed no turn in the measured window: %s.",
				pol, f0(top), strings.Join(idle, ", ")))
		}
	}
	return notes
}

// WriteFiles writes results.json, report.html and table.txt into dir;
// table.txt ends with the balance table and, with a sweep, the sweep's table
// and collapse sentences.
func (r *Results) WriteFiles(dir string) error {
	if err := writeReport(dir, r); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "table.txt"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("study: %w", err)
	}
	if err := r.WriteExtraText(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("study: writing table.txt: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("study: writing table.txt: %w", err)
	}
	return nil
}

// WriteExtraText writes the balance table and, with a sweep, the sweep's
// section: what follows the summary table.
func (r *Results) WriteExtraText(w io.Writer) error {
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	t := r.BalanceTable()
	if err := t.WriteText(w); err != nil {
		return err
	}
	if len(r.Sweep) == 0 {
		return nil
	}
	return r.WriteSweepText(w)
}

// WriteSweepText writes the sweep's table and collapse sentences, after a
// blank line.
func (r *Results) WriteSweepText(w io.Writer) error {
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	t := r.SweepTable()
	if err := t.WriteText(w); err != nil {
		return err
	}
	for _, f := range r.SweepFindings() {
		if _, err := fmt.Fprintln(w, f); err != nil {
			return err
		}
	}
	return nil
}

// reportable is a study's results as its files show them.
type reportable interface {
	WriteJSON(io.Writer) error
	WriteHTML(io.Writer) error
	Table() report.Table
}

// writeReport writes a study's results.json, report.html and table.txt into dir.
func writeReport(dir string, r reportable) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("study: creating output directory: %w", err)
	}
	if err := WriteFile(dir, "results.json", r.WriteJSON); err != nil {
		return err
	}
	if err := WriteFile(dir, "report.html", r.WriteHTML); err != nil {
		return err
	}
	t := r.Table()
	return WriteFile(dir, "table.txt", t.WriteText)
}

// WriteFile creates dir/name and fills it with write.
func WriteFile(dir, name string, write func(io.Writer) error) error {
	f, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		return fmt.Errorf("study: %w", err)
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("study: writing %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("study: writing %s: %w", name, err)
	}
	return nil
}
