package study

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/mix"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/report"
	"github.com/stargate-llm/stargate/workload"
)

// SLOPolicies are the SLO matrix's default policies, in report order; a
// name the registry does not know is left out of the default (so a policy
// appears in the matrix as soon as it is registered).
var SLOPolicies = []string{"round-robin", "least-request", "power-of-two", "waw", "pulsar-waw", "pressure"}

// QuickClasses are the classes of a quick SLO matrix: one of single
// requests, one of growing conversations.
var QuickClasses = []string{"baseline_mixed", "multiturn"}

// Target is the ratio to round-robin the SLO matrix checks at tier 2: the
// Solyx AI Grid paper's best (its range was 1.56-1.75x).
const Target = 1.75

// SLOMatrixOptions choose what the SLO matrix measures. Zero values take
// the defaults given with each field.
type SLOMatrixOptions struct {
	// Fleet gives every class its search range (from the fleet's estimated
	// capacity) and, without a Runner, the fleet to simulate. Required.
	Fleet *config.Fleet
	// Runner measures the steps; nil runs them in the simulator on Fleet.
	Runner Runner
	// Mode names the runner in the report: "sim" (the default) or "live".
	Mode     string
	Registry *policy.Registry
	// Policies default to SLOPolicies, Classes to every workload class (or
	// QuickClasses with Quick), Tiers to 1, 2 and 3.
	Policies []string
	Classes  []string
	Tiers    []int
	// Replicates (seeds 1..N) default to 3, or 1 with Quick.
	Replicates int
	// Steps are the bisection steps after the two end points; default 8.
	Steps   int
	Windows Windows // default DefaultWindows
	// MinSamples is the sample a cell needs to count (default 500): the
	// measured turns of the steps that decided its replicates, summed.
	MinSamples int
	// MinSuccess is the success rate a step must reach (default 0.95).
	MinSuccess float64
	Quick      bool
	Parallel   int
	Progress   Progress
	// Calibrate runs the Solyx AI Grid paper's calibration (Calibrate)
	// with every policy before the searches.
	Calibrate bool
}

// SLOMatrix is the SLO matrix's every search, with every step's raw figures.
type SLOMatrix struct {
	Study      string      `json:"study"`
	Mode       string      `json:"mode"`
	Fleet      string      `json:"fleet"`
	Quick      bool        `json:"quick,omitempty"`
	Windows    Windows     `json:"windows"`
	Steps      int         `json:"steps"`
	Replicates int         `json:"replicates"`
	MinSamples int         `json:"min_samples"`
	MinSuccess float64     `json:"min_success"`
	Policies   []string    `json:"policies"`
	Tiers      []int       `json:"tiers"`
	Classes    []ClassInfo `json:"classes"`
	Searches   []Search    `json:"searches"`
	WallS      float64     `json:"wall_s"`
	// Calibration is the calibration run before the searches, if any.
	Calibration []Calibration `json:"calibration,omitempty"`
}

// ClassInfo is what the matrix knows of a class before measuring it.
type ClassInfo struct {
	Name string `json:"name"`
	Doc  string `json:"doc"`
	// SLOMs are the three tiers' TTFT SLOs in milliseconds.
	SLOMs [3]float64 `json:"slo_ms"`
	// Lo and Hi are the search range in req/s.
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
	// Capacity is the fleet's estimated capacity for the class (req/s) and
	// CapacityRatio what a split by capacity gains over an equal split.
	Capacity      float64 `json:"capacity"`
	CapacityRatio float64 `json:"capacity_ratio"`
	Sessions      bool    `json:"sessions,omitempty"`
}

// Search is one bisection: a class, tier, policy and replicate.
type Search struct {
	Class     string  `json:"class"`
	Tier      int     `json:"tier"`
	SLOMs     float64 `json:"slo_ms"`
	Policy    string  `json:"policy"`
	Replicate int     `json:"replicate"`
	Seed      uint64  `json:"seed"`
	// Rate is the sustainable rate found (0 if not even Lo is sustained);
	// AtUpperBound is set when Hi itself was sustained.
	Rate         float64 `json:"rate"`
	AtUpperBound bool    `json:"at_upper_bound,omitempty"`
	// Samples are the measured turns of the step at Rate.
	Samples int                  `json:"samples"`
	Probes  []Probe[StepFigures] `json:"probes"`
}

// RunSLOMatrix measures the sustainable rate of every class, tier, policy
// and replicate by bisection. Searches of one class, policy and replicate
// run in turn and share the steps they have in common (a step's figures do
// not depend on the SLO); those groups run in parallel.
func RunSLOMatrix(ctx context.Context, opts SLOMatrixOptions) (*SLOMatrix, error) {
	start := time.Now()
	if opts.Fleet == nil {
		return nil, fmt.Errorf("%w: the SLO matrix needs a fleet", ErrInvalidRun)
	}
	reg := opts.Registry
	if reg == nil {
		reg = policy.NewRegistry()
	}
	m := &SLOMatrix{Study: "slo-matrix", Mode: cmpOr(opts.Mode, "sim"), Fleet: opts.Fleet.Name, Quick: opts.Quick,
		Windows: opts.Windows, Steps: opts.Steps, Replicates: opts.Replicates, MinSamples: opts.MinSamples,
		MinSuccess: opts.MinSuccess, Policies: opts.Policies, Tiers: opts.Tiers}
	if m.Windows == (Windows{}) {
		m.Windows = DefaultWindows()
	}
	if m.Steps == 0 {
		m.Steps = 8
	}
	if m.Replicates == 0 {
		m.Replicates = 3
		if opts.Quick {
			m.Replicates = 1
		}
	}
	if m.MinSamples == 0 {
		m.MinSamples = 500
	}
	if m.MinSuccess == 0 {
		m.MinSuccess = 0.95
	}
	if len(m.Tiers) == 0 {
		m.Tiers = []int{1, 2, 3}
	}
	if len(m.Policies) == 0 {
		for _, p := range SLOPolicies {
			if reg.Has(p) {
				m.Policies = append(m.Policies, p)
			}
		}
	}
	classNames := opts.Classes
	if len(classNames) == 0 {
		classNames = workload.ClassNames()
		if opts.Quick {
			classNames = QuickClasses
		}
	}
	if err := m.validate(reg); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRun, err)
	}
	// Any policy will do for the fleet's shape.
	cfg, err := opts.Fleet.SimConfig(config.Run{Policy: m.Policies[0], RPS: 1, Measure: m.Windows.Measure}, reg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRun, err)
	}
	classes := make([]*workload.Class, len(classNames))
	for i, name := range classNames {
		c, err := workload.ClassByName(name)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidRun, err)
		}
		classes[i] = c
		capacity := Capacity(&cfg, c)
		lo, hi := bracket(capacity)
		info := ClassInfo{Name: c.Name, Doc: c.Doc, Lo: lo, Hi: hi, Capacity: hi / 1.25, CapacityRatio: CapacityRatio(capacity), Sessions: c.Sessions}
		for t, d := range c.Tiers {
			info.SLOMs[t] = float64(d) / float64(time.Millisecond)
		}
		m.Classes = append(m.Classes, info)
	}
	runner := opts.Runner
	if runner == nil {
		runner = &SimRunner{Fleet: opts.Fleet, Registry: reg}
	}
	if opts.Calibrate {
		if m.Calibration, err = Calibrate(ctx, runner, m.Policies); err != nil {
			return nil, err
		}
	}

	type group struct {
		class  int
		policy string
		rep    int
	}
	var groups []group
	for ci := range classes {
		for _, pol := range m.Policies {
			for rep := 1; rep <= m.Replicates; rep++ {
				groups = append(groups, group{ci, pol, rep})
			}
		}
	}
	found := make([][]Search, len(groups))
	err = forEach(ctx, len(groups), opts.Parallel, opts.Progress, func(ctx context.Context, gi int) error {
		g := groups[gi]
		c, info := classes[g.class], m.Classes[g.class]
		seed := uint64(g.rep)
		steps := map[float64]StepFigures{}
		try := func(slo time.Duration) func(context.Context, float64) (bool, StepFigures, error) {
			return func(ctx context.Context, rate float64) (bool, StepFigures, error) {
				f, ok := steps[rate]
				if !ok {
					var err error
					f, err = runner.Step(ctx, StepSpec{Class: c, Policy: g.policy, Rate: rate, Seed: seed, Windows: m.Windows})
					if err != nil {
						return false, f, err
					}
					steps[rate] = f
				}
				return f.Sustains(slo, m.MinSuccess), f, nil
			}
		}
		for _, tier := range m.Tiers {
			slo := c.Tiers[tier-1]
			rate, probes, err := SustainableRate(ctx, info.Lo, info.Hi, m.Steps, try(slo))
			if err != nil {
				return fmt.Errorf("study: %s, %s, tier %d, replicate %d: %w", c.Name, g.policy, tier, g.rep, err)
			}
			s := Search{Class: c.Name, Tier: tier, SLOMs: info.SLOMs[tier-1], Policy: g.policy, Replicate: g.rep, Seed: seed,
				Rate: rate, AtUpperBound: rate == info.Hi, Probes: probes}
			for _, p := range probes {
				if p.Sustain && p.Rate == rate {
					s.Samples = p.Figures.Samples()
				}
			}
			found[gi] = append(found[gi], s)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, s := range found {
		m.Searches = append(m.Searches, s...)
	}
	m.WallS = time.Since(start).Seconds()
	return m, nil
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func (m *SLOMatrix) validate(reg *policy.Registry) error {
	var bad []string
	if len(m.Policies) == 0 {
		bad = append(bad, "no policy to measure")
	}
	for _, p := range m.Policies {
		if !reg.Has(p) {
			bad = append(bad, fmt.Sprintf("unknown policy %q (known: %s)", p, strings.Join(reg.Names(), ", ")))
		}
	}
	for _, t := range m.Tiers {
		if t < 1 || t > 3 {
			bad = append(bad, fmt.Sprintf("SLO tier %d: want 1, 2 or 3", t))
		}
	}
	if m.Replicates < 1 || m.Replicates > 100 {
		bad = append(bad, fmt.Sprintf("replicates must be 1-100, got %d", m.Replicates))
	}
	if m.Steps < 1 || m.Steps > 30 {
		bad = append(bad, fmt.Sprintf("bisection steps must be 1-30, got %d", m.Steps))
	}
	w := m.Windows
	if w.Warmup < 0 || w.Measure <= 0 || w.Cooldown < 0 {
		bad = append(bad, fmt.Sprintf("windows: want warm-up and cool-down >= 0 and a measured window > 0, got %v, %v, %v", w.Warmup, w.Measure, w.Cooldown))
	}
	if m.MinSamples < 1 || !(m.MinSuccess > 0 && m.MinSuccess <= 1) {
		bad = append(bad, fmt.Sprintf("min samples must be >= 1 and min success in (0, 1], got %d and %v", m.MinSamples, m.MinSuccess))
	}
	if len(bad) > 0 {
		return fmt.Errorf("SLO matrix: %s", strings.Join(bad, "; "))
	}
	return nil
}

// SLOCell is one class, tier and policy over its replicates.
type SLOCell struct {
	Class  string    `json:"class"`
	Tier   int       `json:"tier"`
	SLOMs  float64   `json:"slo_ms"`
	Policy string    `json:"policy"`
	Rates  []float64 `json:"rates"`
	// Median over replicates, with a 95% percentile-bootstrap interval.
	Median float64 `json:"median"`
	Lo     float64 `json:"ci_lo"`
	Hi     float64 `json:"ci_hi"`
	// Samples are the measured turns of the deciding steps, summed over
	// replicates; the cell counts only with at least MinSamples.
	Samples      int  `json:"samples"`
	Counts       bool `json:"counts"`
	AtUpperBound bool `json:"at_upper_bound,omitempty"`
}

// Cells aggregates the searches over replicates, in search order.
func (m *SLOMatrix) Cells() []SLOCell {
	var cells []SLOCell
	index := map[string]int{}
	for _, s := range m.Searches {
		key := s.Class + "\x00" + strconv.Itoa(s.Tier) + "\x00" + s.Policy
		i, ok := index[key]
		if !ok {
			i = len(cells)
			index[key] = i
			cells = append(cells, SLOCell{Class: s.Class, Tier: s.Tier, SLOMs: s.SLOMs, Policy: s.Policy})
		}
		c := &cells[i]
		c.Rates = append(c.Rates, s.Rate)
		c.Samples += s.Samples
		c.AtUpperBound = c.AtUpperBound || s.AtUpperBound
	}
	for i := range cells {
		c := &cells[i]
		c.Median = median(c.Rates)
		c.Lo, c.Hi = bootstrapMedian(c.Rates, 2000, 0.95, mix.Mix64(uint64(i)))
		c.Counts = c.Samples >= m.MinSamples
	}
	return cells
}

// bootstrapMedian is the percentile-bootstrap confidence interval of the
// median of values at the given level.
func bootstrapMedian(values []float64, resamples int, level float64, seed uint64) (lo, hi float64) {
	if len(values) == 0 {
		return math.NaN(), math.NaN()
	}
	rng := rand.New(rand.NewPCG(seed, 0x5107))
	meds := make([]float64, resamples)
	draw := make([]float64, len(values))
	for i := range meds {
		for j := range draw {
			draw[j] = values[rng.IntN(len(values))]
		}
		meds[i] = median(draw)
	}
	slices.Sort(meds)
	q := func(p float64) float64 { return meds[min(int(p*float64(resamples)), resamples-1)] }
	return q((1 - level) / 2), q((1 + level) / 2)
}

// Row is one class and tier of the matrix: each policy's cell, the best
// policy other than round-robin and its ratio to round-robin.
type Row struct {
	Class string
	Tier  int
	SLOMs float64
	Cells map[string]SLOCell
	Best  string
	// Ratio is Best's median over round-robin's (NaN without round-robin or
	// when round-robin sustains nothing).
	Ratio         float64
	CapacityRatio float64
}

// Rows groups the cells by class and tier, in class and tier order.
func (m *SLOMatrix) Rows() []Row {
	cells := m.Cells()
	var rows []Row
	for _, c := range m.Classes {
		for _, tier := range m.Tiers {
			r := Row{Class: c.Name, Tier: tier, SLOMs: c.SLOMs[tier-1], Cells: map[string]SLOCell{}, Ratio: math.NaN(), CapacityRatio: c.CapacityRatio}
			for _, cell := range cells {
				if cell.Class == c.Name && cell.Tier == tier {
					r.Cells[cell.Policy] = cell
				}
			}
			if len(r.Cells) > 0 {
				rows = append(rows, r)
			}
		}
	}
	for i := range rows {
		r := &rows[i]
		for _, p := range m.Policies {
			c, ok := r.Cells[p]
			if !ok || p == "round-robin" {
				continue
			}
			if r.Best == "" || c.Median > r.Cells[r.Best].Median {
				r.Best = p
			}
		}
		if rr, ok := r.Cells["round-robin"]; ok && r.Best != "" && rr.Median > 0 {
			r.Ratio = r.Cells[r.Best].Median / rr.Median
		}
	}
	return rows
}

// Table is the matrix in the Solyx AI Grid paper's shape: class, tier and SLO, each
// policy's sustainable rate (median over replicates, req/s), the best
// policy's ratio to round-robin and the fleet's CapacityRatio for the
// class. A rate marked * rests on fewer than MinSamples turns.
func (m *SLOMatrix) Table() report.Table {
	t := report.Table{Title: fmt.Sprintf("SLO matrix, fleet %s (%s): sustainable req/s, median of %d replicate(s)", m.Fleet, m.Mode, m.Replicates),
		Headers: append(append([]string{"class", "tier", "slo ms"}, m.Policies...), "best", "best/rr", "cap/rr")}
	for _, r := range m.Rows() {
		row := []string{r.Class, strconv.Itoa(r.Tier), f0(r.SLOMs)}
		for _, p := range m.Policies {
			c, ok := r.Cells[p]
			switch {
			case !ok:
				row = append(row, "")
			case !c.Counts:
				row = append(row, f1(c.Median)+"*")
			case c.AtUpperBound:
				row = append(row, ">="+f1(c.Median))
			default:
				row = append(row, f1(c.Median))
			}
		}
		row = append(row, r.Best, ratio(r.Ratio), ratio(r.CapacityRatio))
		t.Rows = append(t.Rows, row)
	}
	return t
}

func ratio(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return f2(v) + "x"
}

// CellsTable lists every cell with its replicates, interval and samples.
func (m *SLOMatrix) CellsTable() report.Table {
	t := report.Table{Headers: []string{"class", "tier", "policy", "median", "ci lo", "ci hi", "replicates", "samples", "counts"}}
	for _, c := range m.Cells() {
		var reps []string
		for _, r := range c.Rates {
			reps = append(reps, f1(r))
		}
		t.Rows = append(t.Rows, []string{c.Class, strconv.Itoa(c.Tier), c.Policy, f1(c.Median), f1(c.Lo), f1(c.Hi),
			strings.Join(reps, " "), strconv.Itoa(c.Samples), strconv.FormatBool(c.Counts)})
	}
	return t
}

// Findings says, for each class at tier 2 (or the middle tier measured),
// which policy sustains most, its ratio to round-robin against Target, and
// the fleet's CapacityRatio for the class.
func (m *SLOMatrix) Findings() []string {
	tier := m.Tiers[len(m.Tiers)/2]
	out := calibrationLines(m.Calibration)
	for _, r := range m.Rows() {
		if r.Tier != tier || math.IsNaN(r.Ratio) {
			continue
		}
		best, rr := r.Cells[r.Best], r.Cells["round-robin"]
		verdict := fmt.Sprintf("reaches the %.2fx target", Target)
		if r.Ratio < Target {
			verdict = fmt.Sprintf("falls short of the %.2fx target", Target)
		}
		note := ""
		if !best.Counts || !rr.Counts {
			note = fmt.Sprintf(" (fewer than %d samples in a cell)", m.MinSamples)
		}
		out = append(out, fmt.Sprintf("%s, tier %d (%s ms): %s sustains %.1f req/s, %.2fx round-robin's %.1f; it %s. "+
			"The fleet's capacity for the class is %.2fx what an equal split can use.%s",
			r.Class, r.Tier, f0(r.SLOMs), r.Best, best.Median, r.Ratio, rr.Median, verdict, r.CapacityRatio, note))
	}
	return out
}

// WriteJSON writes the matrix, with every search's raw steps, as one JSON
// object.
func (m *SLOMatrix) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(m)
}

// WriteHTML writes a self-contained report with a chart per class.
func (m *SLOMatrix) WriteHTML(w io.Writer) error {
	p := report.NewPage("Stargate SLO matrix, fleet " + m.Fleet)
	p.Paragraph(fmt.Sprintf("Sustainable rate: the highest constant request rate at which P95 TTFT is within the SLO and at least %.0f%% of requests succeed, "+
		"found by bisection (%d steps after the two ends of each class's range). Each step sends the class's traffic for %v of warm-up, %v measured and %v of cool-down; "+
		"the requests sent in the measured window are the sample, and the cool-down lets them finish. Bars are the median over %d replicate(s) with a 95%% bootstrap interval. Mode: %s.",
		100*m.MinSuccess, m.Steps, m.Windows.Warmup, m.Windows.Measure, m.Windows.Cooldown, m.Replicates, m.Mode))
	if m.Quick {
		p.Paragraph("Quick run: one replicate of two classes. Figures are indicative only.")
	}
	p.Heading("Findings")
	for _, f := range m.Findings() {
		p.Paragraph(f)
	}
	cells := m.Cells()
	for _, c := range m.Classes {
		p.Heading("Class " + c.Name)
		p.Paragraph(c.Doc)
		ch := report.BarChart{Title: "Sustainable rate by policy and SLO tier, " + c.Name, XLabel: "SLO tier (P95 TTFT)", YLabel: "sustainable rate (req/s)"}
		for _, t := range m.Tiers {
			ch.Categories = append(ch.Categories, fmt.Sprintf("tier %d (%s ms)", t, f0(c.SLOMs[t-1])))
		}
		for _, pol := range m.Policies {
			s := report.BarSeries{Name: pol}
			for _, t := range m.Tiers {
				bar := report.Bar{Value: math.NaN()}
				for _, cell := range cells {
					if cell.Class == c.Name && cell.Tier == t && cell.Policy == pol {
						bar = report.Bar{Value: cell.Median, Lo: cell.Lo, Hi: cell.Hi, HasRange: len(cell.Rates) > 1}
					}
				}
				s.Bars = append(s.Bars, bar)
			}
			ch.Series = append(ch.Series, s)
		}
		p.Chart(ch.SVG())
		p.Paragraph(fmt.Sprintf("Search range %.1f-%.1f req/s; estimated fleet capacity %.1f req/s, %.2fx what an equal split can use.", c.Lo, c.Hi, c.Capacity, c.CapacityRatio))
	}
	p.Heading("Matrix")
	p.Table(m.Table())
	p.Heading("Cells")
	p.Table(m.CellsTable())
	return p.Write(w)
}

// WriteFiles writes results.json, report.html, table.txt and table.md into
// dir.
func (m *SLOMatrix) WriteFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("study: creating output directory: %w", err)
	}
	if err := WriteFile(dir, "results.json", m.WriteJSON); err != nil {
		return err
	}
	if err := WriteFile(dir, "report.html", m.WriteHTML); err != nil {
		return err
	}
	t := m.Table()
	if err := WriteFile(dir, "table.md", t.WriteMarkdown); err != nil {
		return err
	}
	return WriteFile(dir, "table.txt", t.WriteText)
}
