package study

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/report"
)

// SweepOptions shape the routing study's rate sweep: goodput against nominal
// rate with the full-scale engine.
type SweepOptions struct {
	Fleets   []string
	Policies []string
	Rates    []float64
	Seeds    []uint64
	Engine   string
	Warmup   time.Duration
	Measure  time.Duration
}

// SweepPolicies are the policies the sweep runs by default: the two affinity
// policies and the measured-TPS reading of pulsar-waw.
var SweepPolicies = []string{"pulsar-waw", "waw", "pulsar-waw-tps"}

// DefaultSweep is the sweep of the routing report: both fleets, seeds 1 and
// 2, 250 to 1,100 req/s in steps of 170 (six rates), the full-scale engine,
// 240 s of warm-up and 240 s measured; 72 runs.
func DefaultSweep() SweepOptions {
	return SweepOptions{
		Fleets:   []string{"hetero", "homo"},
		Policies: SweepPolicies,
		Rates:    []float64{250, 420, 590, 760, 930, 1100},
		Seeds:    []uint64{1, 2},
		Engine:   "full",
		Warmup:   240 * time.Second,
		Measure:  240 * time.Second,
	}
}

// QuickSweep is the sweep of a quick study: the same rates and seeds with
// the quick study's 150 s warm-up and 60 s measured.
func QuickSweep() SweepOptions {
	o := DefaultSweep()
	o.Warmup, o.Measure = 150*time.Second, 60*time.Second
	return o
}

// Specs expands the sweep into runs, fleet by fleet, then policy, rate and
// seed.
func (o SweepOptions) Specs() ([]RunSpec, error) {
	if len(o.Fleets) == 0 || len(o.Policies) == 0 || len(o.Rates) == 0 || len(o.Seeds) == 0 {
		return nil, fmt.Errorf("study: the sweep needs at least one fleet, policy, rate and seed (got %d, %d, %d, %d)",
			len(o.Fleets), len(o.Policies), len(o.Rates), len(o.Seeds))
	}
	var specs []RunSpec
	for _, name := range o.Fleets {
		fleet, ok := config.Preset(name)
		if !ok {
			return nil, fmt.Errorf("study: sweep: no preset fleet %q (known: %s)", name, strings.Join(config.PresetNames(), ", "))
		}
		for _, pol := range o.Policies {
			for _, rps := range o.Rates {
				for _, seed := range o.Seeds {
					specs = append(specs, RunSpec{FleetName: name, Fleet: fleet, Policy: pol, RPS: rps, Seed: seed,
						Engine: o.Engine, Warmup: o.Warmup, Measure: o.Measure})
				}
			}
		}
	}
	return specs, nil
}

// sweepCells are the sweep's runs averaged over seeds.
func (r *Results) sweepCells() []Cell {
	return (&Results{Runs: r.Sweep}).Cells()
}

// mid is the midpoint of a cell's goodput range over seeds.
func (c Cell) mid() float64 { return (c.GoodputLo + c.GoodputHi) / 2 }

// SweepTable is the sweep's own table: one row per fleet, policy and rate.
func (r *Results) SweepTable() report.Table {
	engine := ""
	if len(r.Sweep) > 0 {
		engine = r.Sweep[0].Engine
	}
	t := report.Table{Title: fmt.Sprintf("routing sweep, %s engine (goodput midpoint and range over seeds)", engine),
		Headers: []string{"fleet", "policy", "rps", "seeds", "offered", "goodput mid", "range", "goodput/rate %", "slo%", "p99 s"}}
	for _, c := range r.sweepCells() {
		t.Rows = append(t.Rows, []string{c.Fleet, c.Policy, f0(c.RPS), strconv.Itoa(c.Seeds), f1(c.Offered), f1(c.mid()),
			f1(c.GoodputLo) + "-" + f1(c.GoodputHi), f1(100 * c.mid() / c.RPS), f1(c.SLO), f2(c.P99)})
	}
	return t
}

// sweepCurve is one policy's cells on one fleet, by rate.
func sweepCurve(cells []Cell, fleet, pol string) []Cell {
	var out []Cell
	for _, c := range cells {
		if c.Fleet == fleet && c.Policy == pol {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Cell) int { return cmpF(a.RPS, b.RPS) })
	return out
}

// Tracking and collapse thresholds of the sweep's sentences: a policy
// tracks the rate while its goodput midpoint is at least trackShare of it,
// and collapses at the first rate past its peak where the midpoint falls
// below collapseShare of the peak.
const (
	trackShare    = 0.95
	collapseShare = 0.9
)

// Collapse describes, in one sentence, how a policy's goodput follows the
// nominal rate on a fleet: up to which rate it tracks the rate, where it
// peaks, and the first rate past the peak where it collapses (if any).
func Collapse(curve []Cell) string {
	if len(curve) == 0 {
		return ""
	}
	c0 := curve[0]
	tracks := -1
	for i, c := range curve {
		if c.mid() < trackShare*c.RPS {
			break
		}
		tracks = i
	}
	peak := 0
	for i, c := range curve {
		if c.mid() > curve[peak].mid() {
			peak = i
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s on %s: ", c0.Policy, c0.Fleet)
	switch {
	case tracks == len(curve)-1:
		fmt.Fprintf(&b, "goodput tracks the rate (within %.0f%%) up to %s req/s, the top of the sweep", 100*(1-trackShare), f0(curve[tracks].RPS))
	case tracks >= 0:
		fmt.Fprintf(&b, "goodput tracks the rate (within %.0f%%) up to %s req/s", 100*(1-trackShare), f0(curve[tracks].RPS))
	default:
		fmt.Fprintf(&b, "goodput is already below %.0f%% of the rate at %s req/s", 100*trackShare, f0(c0.RPS))
	}
	p := curve[peak]
	fmt.Fprintf(&b, "; it peaks at %s req/s of goodput at %s req/s", f1(p.mid()), f0(p.RPS))
	for _, c := range curve[peak+1:] {
		if c.mid() < collapseShare*p.mid() {
			fmt.Fprintf(&b, " and collapses at %s req/s (goodput %s, %.0f%% of its peak).", f0(c.RPS), f1(c.mid()), 100*c.mid()/p.mid())
			return b.String()
		}
	}
	if peak < len(curve)-1 {
		fmt.Fprintf(&b, " and holds at least %.0f%% of it up to %s req/s: no collapse.", 100*collapseShare, f0(curve[len(curve)-1].RPS))
		return b.String()
	}
	b.WriteString(": no collapse.")
	return b.String()
}

// SweepFindings are the sweep's collapse sentences, one per fleet and policy.
func (r *Results) SweepFindings() []string {
	cells := r.sweepCells()
	var out []string
	for _, fleet := range fleetsOf(r.Sweep) {
		for _, pol := range policiesOf(r.Sweep) {
			if s := Collapse(sweepCurve(cells, fleet, pol)); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

func fleetsOf(runs []RunResult) []string {
	var names []string
	for _, run := range runs {
		if !slices.Contains(names, run.Fleet) {
			names = append(names, run.Fleet)
		}
	}
	return names
}

func policiesOf(runs []RunResult) []string {
	var names []string
	for _, run := range runs {
		if !slices.Contains(names, run.Policy) {
			names = append(names, run.Policy)
		}
	}
	return names
}

// SweepChart draws goodput against nominal rate on one fleet: lines join the
// seed midpoints, bars show the range over seeds, and goodput = rate is
// dotted.
func (r *Results) SweepChart(fleet string) report.ScatterChart {
	cells := r.sweepCells()
	ch := report.ScatterChart{Title: "Goodput against nominal rate, " + fleet + " (sweep)",
		XLabel: "nominal rate (req/s)", YLabel: "goodput (req/s)", Identity: true}
	for _, pol := range policiesOf(r.Sweep) {
		s := report.ScatterSeries{Name: pol, Line: true}
		for _, c := range sweepCurve(cells, fleet, pol) {
			s.Points = append(s.Points, report.Point{X: c.RPS, Y: c.mid(), Lo: c.GoodputLo, Hi: c.GoodputHi, HasRange: c.Seeds > 1})
		}
		ch.Series = append(ch.Series, s)
	}
	return ch
}

// writeSweepHTML adds the sweep's section to a routing report page.
func (r *Results) writeSweepHTML(p *report.Page) {
	if len(r.Sweep) == 0 {
		return
	}
	p.Heading("Sweep: goodput against nominal rate")
	p.Paragraph(fmt.Sprintf("Engine %s, seeds %s. Lines join the midpoints of the seeds' goodput, bars show its range over seeds, and the dotted line is goodput = rate. A policy tracks the rate while its goodput is within %.0f%% of it, and collapses at the first rate past its peak where goodput falls below %.0f%% of that peak.",
		r.Sweep[0].Engine, seedsOf(r.Sweep), 100*(1-trackShare), 100*collapseShare))
	for _, f := range r.SweepFindings() {
		p.Paragraph(f)
	}
	for _, fleet := range fleetsOf(r.Sweep) {
		p.Chart(r.SweepChart(fleet).SVG())
	}
	p.Table(r.SweepTable())
}

func seedsOf(runs []RunResult) string {
	var seeds []uint64
	for _, run := range runs {
		if !slices.Contains(seeds, run.Seed) {
			seeds = append(seeds, run.Seed)
		}
	}
	slices.Sort(seeds)
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, ", ")
}
