package study

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/stargate-llm/stargate/report"
)

// OverlapResults are the overlap study's runs.
type OverlapResults struct {
	Study      string       `json:"study"`
	Quick      bool         `json:"quick,omitempty"`
	Workers    int          `json:"workers"`
	MaxWaiting int          `json:"max_waiting"`
	Warmup     float64      `json:"warmup_s"`
	Measure    float64      `json:"measure_s"`
	Runs       []OverlapRun `json:"runs"`
	// Live marks runs on a live fleet; Sim then holds the simulator's runs
	// of the same specs.
	Live bool            `json:"live,omitempty"`
	Sim  *OverlapResults `json:"sim,omitempty"`
}

// OverlapCell is one client count and slot setting, over seeds.
type OverlapCell struct {
	Clients    int  `json:"clients"`
	Slots      int  `json:"max_inflight_per_worker"`
	RequestsPS Stat `json:"requests_per_s"`
	InputTPS   Stat `json:"input_tokens_per_s"`
	ClientP50S Stat `json:"client_p50_s"`
	ClientP95S Stat `json:"client_p95_s"`
	TTFTP95S   Stat `json:"ttft_p95_s"`
	QueueMeanS Stat `json:"gateway_queue_mean_s"`
	StepMeanMS Stat `json:"engine_step_mean_ms"`
	MeanBatch  Stat `json:"mean_batch"`
	BusyPct    Stat `json:"busy_pct"`
	Failures   Stat `json:"failures"`
	Rejections Stat `json:"rejections"`
	Degraded   Stat `json:"degraded"`
	Preempted  Stat `json:"preempted"`
	FailedPct  Stat `json:"failed_pct"`
	// DegradedPct is over completed turns.
	DegradedPct Stat `json:"degraded_pct"`
	ReusePct    Stat `json:"reuse_pct"`
}

// Cells aggregates the runs by client count and setting, in that order.
func (r *OverlapResults) Cells() []OverlapCell {
	type key struct{ clients, slots int }
	groups := map[key][]OverlapRun{}
	var keys []key
	for _, m := range r.Runs {
		k := key{m.Clients, m.Slots}
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], m)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.clients, b.clients), cmp.Compare(a.slots, b.slots)) })
	cells := make([]OverlapCell, 0, len(keys))
	for _, k := range keys {
		ms := groups[k]
		get := func(f func(OverlapRun) float64) Stat {
			vs := make([]float64, len(ms))
			for i, m := range ms {
				vs[i] = f(m)
			}
			return NewStat(vs)
		}
		cells = append(cells, OverlapCell{Clients: k.clients, Slots: k.slots,
			RequestsPS:  get(func(m OverlapRun) float64 { return m.RequestsPS }),
			InputTPS:    get(func(m OverlapRun) float64 { return m.InputTPS }),
			ClientP50S:  get(func(m OverlapRun) float64 { return m.ClientP50S }),
			ClientP95S:  get(func(m OverlapRun) float64 { return m.ClientP95S }),
			TTFTP95S:    get(func(m OverlapRun) float64 { return m.TTFTP95S }),
			QueueMeanS:  get(func(m OverlapRun) float64 { return m.QueueMeanS }),
			StepMeanMS:  get(func(m OverlapRun) float64 { return m.StepMeanMS }),
			MeanBatch:   get(func(m OverlapRun) float64 { return m.MeanBatch }),
			BusyPct:     get(func(m OverlapRun) float64 { return m.BusyPct }),
			Failures:    get(func(m OverlapRun) float64 { return float64(m.Failures) }),
			Rejections:  get(func(m OverlapRun) float64 { return float64(m.Rejections) }),
			Degraded:    get(func(m OverlapRun) float64 { return float64(m.Degraded) }),
			Preempted:   get(func(m OverlapRun) float64 { return float64(m.Preempted) }),
			FailedPct:   get(func(m OverlapRun) float64 { return m.FailedPct }),
			DegradedPct: get(func(m OverlapRun) float64 { return m.DegradedPct }),
			ReusePct:    get(func(m OverlapRun) float64 { return m.ReusePct }),
		})
	}
	return cells
}

func (r *OverlapResults) seeds() int {
	n := 0
	for _, m := range r.Runs {
		if m.Clients == r.Runs[0].Clients && m.Slots == r.Runs[0].Slots {
			n++
		}
	}
	return n
}

// Table is the study's table: means over seeds.
func (r *OverlapResults) Table() report.Table {
	kind := "overlap study"
	if r.Live {
		kind = "live overlap study"
	}
	t := report.Table{Title: fmt.Sprintf("%s: one backend of %d half-scale GPUs, closed-loop clients, %g s measured after %g s warm-up (means over %d seeds)",
		kind, r.Workers, r.Measure, r.Warmup, r.seeds()),
		Headers: []string{"clients", "slots", "req/s", "input tok/s", "client p50 s", "client p95 s", "TTFT p95 s",
			"gw queue s", "step ms", "mean batch", "reuse %", "failed %", "degraded %"}}
	for _, c := range r.Cells() {
		t.Rows = append(t.Rows, []string{strconv.Itoa(c.Clients), strconv.Itoa(c.Slots),
			f(c.RequestsPS.Mean, 2), f(c.InputTPS.Mean, 0), f(c.ClientP50S.Mean, 2), f(c.ClientP95S.Mean, 2), f(c.TTFTP95S.Mean, 2),
			f(c.QueueMeanS.Mean, 2), f(c.StepMeanMS.Mean, 2), f(c.MeanBatch.Mean, 2), f(c.ReusePct.Mean, 1),
			f(c.FailedPct.Mean, 1), f(c.DegradedPct.Mean, 1)})
	}
	return t
}

func f(v float64, digits int) string { return strconv.FormatFloat(v, 'f', digits, 64) }

// overlapMetric is one figure the findings compare across settings.
type overlapMetric struct {
	name   string
	higher bool // higher is better
	// survivors: the figure is over completed turns only, so a setting
	// that fails many more turns than the best cannot win it.
	survivors bool
	get       func(OverlapCell) float64
}

var overlapMetrics = []overlapMetric{
	{"requests/s", true, false, func(c OverlapCell) float64 { return c.RequestsPS.Mean }},
	{"input tokens/s", true, false, func(c OverlapCell) float64 { return c.InputTPS.Mean }},
	{"client p50", false, true, func(c OverlapCell) float64 { return c.ClientP50S.Mean }},
	{"client p95", false, true, func(c OverlapCell) float64 { return c.ClientP95S.Mean }},
	{"failed %", false, false, func(c OverlapCell) float64 { return c.FailedPct.Mean }},
	{"degraded %", false, true, func(c OverlapCell) float64 { return c.DegradedPct.Mean }},
}

// survivorSlack is how many percentage points of failed turns above the
// lowest a setting may have and still win a figure over completed turns.
const survivorSlack = 1.0

// tieShare is how close two settings' figures must be to count as a tie:
// within 2% of the larger, or both below 0.5 (counts of a few turns).
const tieShare = 0.02

func tied(a, b float64) bool {
	return max(a, b) < 0.5 || max(a-b, b-a) <= tieShare*max(a, b)
}

// Winners says, per client count and figure, which settings win: the best
// one, or every setting tied with it.
func (r *OverlapResults) Winners() []OverlapWinner {
	cells := r.Cells()
	var out []OverlapWinner
	for _, clients := range r.clientCounts() {
		var row []OverlapCell
		for _, c := range cells {
			if c.Clients == clients {
				row = append(row, c)
			}
		}
		leastFailed := row[0].FailedPct.Mean
		for _, c := range row {
			leastFailed = min(leastFailed, c.FailedPct.Mean)
		}
		for _, m := range overlapMetrics {
			var eligible []OverlapCell
			for _, c := range row {
				if !m.survivors || c.FailedPct.Mean <= leastFailed+survivorSlack {
					eligible = append(eligible, c)
				}
			}
			best := eligible[0]
			for _, c := range eligible[1:] {
				if v, b := m.get(c), m.get(best); (m.higher && v > b) || (!m.higher && v < b) {
					best = c
				}
			}
			w := OverlapWinner{Clients: clients, Metric: m.name}
			for _, c := range eligible {
				if tied(m.get(c), m.get(best)) {
					w.Slots = append(w.Slots, c.Slots)
				}
			}
			out = append(out, w)
		}
	}
	return out
}

// OverlapWinner names the winning settings of one figure at one client
// count (several when they tie).
type OverlapWinner struct {
	Clients int    `json:"clients"`
	Metric  string `json:"metric"`
	Slots   []int  `json:"slots"`
}

func (r *OverlapResults) clientCounts() []int {
	var cs []int
	for _, m := range r.Runs {
		if !slices.Contains(cs, m.Clients) {
			cs = append(cs, m.Clients)
		}
	}
	slices.Sort(cs)
	return cs
}

func (r *OverlapResults) slotSettings() []int {
	var ss []int
	for _, m := range r.Runs {
		if !slices.Contains(ss, m.Slots) {
			ss = append(ss, m.Slots)
		}
	}
	slices.Sort(ss)
	return ss
}

// Findings says in words where each setting wins and compares the largest
// setting (the default) with the others at every client count.
func (r *OverlapResults) Findings() []string {
	out := []string{"Best settings tie when within 2% of each other; latency and degraded % are over completed turns, so a setting that fails more than 1 point more of its turns than the best cannot win them."}
	if r.Live {
		out = append(out, "Live runs: the engine does not say which request it preempted, so degraded % counts late turns plus the engine's preemptions (an upper bound).")
		out = append(out, r.simAgreement()...)
	}
	byClients := map[int][]string{}
	for _, w := range r.Winners() {
		byClients[w.Clients] = append(byClients[w.Clients], fmt.Sprintf("%s: %s", w.Metric, slotList(w.Slots)))
	}
	for _, c := range r.clientCounts() {
		out = append(out, fmt.Sprintf("%d clients, best setting per figure: %s.", c, strings.Join(byClients[c], "; ")))
	}
	settings := r.slotSettings()
	if len(settings) < 2 {
		return out
	}
	top := settings[len(settings)-1]
	cells := r.Cells()
	find := func(clients, slots int) *OverlapCell {
		for i := range cells {
			if cells[i].Clients == clients && cells[i].Slots == slots {
				return &cells[i]
			}
		}
		return nil
	}
	for _, c := range r.clientCounts() {
		d := find(c, top)
		if d == nil {
			continue
		}
		var parts []string
		for _, s := range settings[:len(settings)-1] {
			o := find(c, s)
			if o == nil || o.RequestsPS.Mean == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("vs %d: requests/s %s, input tokens/s %s, client p50 %s, p95 %s, failed %.1f%% vs %.1f%%, mean batch %.2f vs %.2f",
				s, change(d.RequestsPS.Mean, o.RequestsPS.Mean), change(d.InputTPS.Mean, o.InputTPS.Mean), change(d.ClientP50S.Mean, o.ClientP50S.Mean),
				change(d.ClientP95S.Mean, o.ClientP95S.Mean), d.FailedPct.Mean, o.FailedPct.Mean, d.MeanBatch.Mean, o.MeanBatch.Mean))
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("%d clients, %d slots %s.", c, top, strings.Join(parts, "; ")))
		}
	}
	return out
}

// simAgreement compares each live cell with its simulator twin.
func (r *OverlapResults) simAgreement() []string {
	if r.Sim == nil {
		return nil
	}
	twin := map[[2]int]OverlapCell{}
	for _, c := range r.Sim.Cells() {
		twin[[2]int{c.Clients, c.Slots}] = c
	}
	var out []string
	for _, c := range r.Cells() {
		t, ok := twin[[2]int{c.Clients, c.Slots}]
		if !ok {
			continue
		}
		out = append(out, fmt.Sprintf("%d clients, %d slots, live vs sim: requests/s %.2f vs %.2f (%s), client p95 %.2f vs %.2f s, gateway queue %.2f vs %.2f s, step %.1f vs %.1f ms, mean batch %.1f vs %.1f.",
			c.Clients, c.Slots, c.RequestsPS.Mean, t.RequestsPS.Mean, change(c.RequestsPS.Mean, t.RequestsPS.Mean),
			c.ClientP95S.Mean, t.ClientP95S.Mean, c.QueueMeanS.Mean, t.QueueMeanS.Mean, c.StepMeanMS.Mean, t.StepMeanMS.Mean,
			c.MeanBatch.Mean, t.MeanBatch.Mean))
	}
	return out
}

// change is new relative to old, as a signed percentage.
func change(v, old float64) string {
	if old == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f%%", 100*(v/old-1))
}

func slotList(ss []int) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = strconv.Itoa(s)
	}
	return strings.Join(parts, ", ")
}

// WriteJSON writes the runs, the cells and the winners.
func (r *OverlapResults) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*OverlapResults
		Cells    []OverlapCell   `json:"cells"`
		Winners  []OverlapWinner `json:"winners"`
		Findings []string        `json:"findings"`
	}{r, r.Cells(), r.Winners(), r.Findings()})
}

// WriteHTML writes a self-contained report with charts against client count.
func (r *OverlapResults) WriteHTML(w io.Writer) error {
	p := report.NewPage("Stargate overlap study")
	p.Paragraph(fmt.Sprintf("Closed-loop clients against one backend of %d half-scale GPUs, comparing max_inflight_per_worker settings. "+
		"Each client sends its next turn when the previous one ends. The gateway's waiting bound is %d requests for every setting. "+
		"Degraded completions are completed turns that missed the 10 s TTFT SLO or were preempted and recomputed in the engine.",
		r.Workers, r.MaxWaiting))
	if r.Quick {
		p.Paragraph("Quick run: one seed, 20 s warm-up and 40 s measured. Figures are indicative only.")
	}
	p.Heading("Findings")
	for _, s := range r.Findings() {
		p.Paragraph(s)
	}
	cells := r.Cells()
	p.Chart(r.chart(cells, "Requests per second", "requests/s", func(c OverlapCell) float64 { return c.RequestsPS.Mean }).SVG())
	p.Chart(r.chart(cells, "Client latency p95", "p95 (s)", func(c OverlapCell) float64 { return c.ClientP95S.Mean }).SVG())
	p.Chart(r.chart(cells, "Mean engine batch", "sequences", func(c OverlapCell) float64 { return c.MeanBatch.Mean }).SVG())
	p.Heading("All cells")
	p.Table(r.Table())
	return p.Write(w)
}

func (r *OverlapResults) chart(cells []OverlapCell, title, ylabel string, get func(OverlapCell) float64) report.ScatterChart {
	ch := report.ScatterChart{Title: title + " against clients", XLabel: "closed-loop clients", YLabel: ylabel}
	for _, s := range r.slotSettings() {
		series := report.ScatterSeries{Name: fmt.Sprintf("%d per worker", s), Line: true}
		for _, c := range cells {
			if c.Slots == s {
				series.Points = append(series.Points, report.Point{X: float64(c.Clients), Y: get(c)})
			}
		}
		ch.Series = append(ch.Series, series)
	}
	return ch
}

// WriteFiles writes results.json, report.html and table.txt into dir.
func (r *OverlapResults) WriteFiles(dir string) error {
	return writeReport(dir, r)
}
