package study

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/stargate-llm/stargate/report"
	"github.com/stargate-llm/stargate/router"
)

// ResilienceResults are the resilience study's runs.
type ResilienceResults struct {
	Study string  `json:"study"`
	Quick bool    `json:"quick,omitempty"`
	RPS   float64 `json:"rps"`
	// Scale is a live study's scale (its runs have Mode "sim" or "live");
	// zero for the simulator study at full scale.
	Scale float64        `json:"scale,omitempty"`
	Runs  []PhaseMetrics `json:"runs"`
}

// modes lists the runs' modes in order of appearance.
func (r *ResilienceResults) modes() []string {
	var out []string
	for _, m := range r.Runs {
		if !slices.Contains(out, m.Mode) {
			out = append(out, m.Mode)
		}
	}
	return out
}

// only is r restricted to the runs of one mode.
func (r *ResilienceResults) only(mode string) *ResilienceResults {
	c := *r
	c.Runs = nil
	for _, m := range r.Runs {
		if m.Mode == mode {
			c.Runs = append(c.Runs, m)
		}
	}
	return &c
}

// modeLabel prefixes a line with its mode in a live study.
func modeLabel(mode string) string {
	if mode == "" {
		return ""
	}
	return mode + ": "
}

// PhaseCell aggregates one phase and policy over replicates.
type PhaseCell struct {
	Phase         string `json:"phase"`
	Policy        string `json:"policy"`
	Mode          string `json:"mode,omitempty"`
	Success       Stat   `json:"success_pct"`
	P50           Stat   `json:"ttft_p50_s"`
	P95           Stat   `json:"ttft_p95_s"`
	P99           Stat   `json:"ttft_p99_s"`
	Misroutes     Stat   `json:"misroutes"`
	Leak          Stat   `json:"leak_pct"`
	Detect        Stat   `json:"detect_s"`
	Detected      int    `json:"detected"` // replicates in which the fault was detected
	Recover       Stat   `json:"recover_s"`
	RouterDetect  Stat   `json:"router_detect_s"`
	HasDetect     bool   `json:"has_detect"`
	HasRouterMark bool   `json:"has_router_detect"`
	LongSuccess   Stat   `json:"long_success_pct"`
	RerouteP50    Stat   `json:"reroute_p50_s"`
	RerouteP95    Stat   `json:"reroute_p95_s"`
	RerouteP99    Stat   `json:"reroute_p99_s"`
	Breaches      Stat   `json:"breaches"`
	Lead          Stat   `json:"lead_s"`
	// RerouteTurns and RerouteFailed sum the replicates' turns that the
	// kill caught and that completed, or failed (see PhaseMetrics).
	RerouteTurns  int `json:"reroute_turns"`
	RerouteFailed int `json:"reroute_failed"`
}

// Cells aggregates the runs by phase and policy, in run order.
func (r *ResilienceResults) Cells() []PhaseCell {
	type key struct{ phase, policy, mode string }
	var order []key
	groups := map[key][]PhaseMetrics{}
	for _, m := range r.Runs {
		k := key{m.Phase, m.Policy, m.Mode}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m)
	}
	var cells []PhaseCell
	for _, k := range order {
		ms := groups[k]
		get := func(f func(PhaseMetrics) float64) Stat {
			vs := make([]float64, len(ms))
			for i, m := range ms {
				vs[i] = f(m)
			}
			return NewStat(vs)
		}
		c := PhaseCell{Phase: k.phase, Policy: k.policy, Mode: k.mode,
			LongSuccess: get(func(m PhaseMetrics) float64 { return m.LongSuccessPct }),
			RerouteP50:  get(func(m PhaseMetrics) float64 { return m.RerouteP50S }),
			RerouteP95:  get(func(m PhaseMetrics) float64 { return m.RerouteP95S }),
			RerouteP99:  get(func(m PhaseMetrics) float64 { return m.RerouteP99S }),
			Breaches:    get(func(m PhaseMetrics) float64 { return float64(m.Breaches) }),
			Lead:        get(func(m PhaseMetrics) float64 { return m.LeadS }),
			Success:     get(func(m PhaseMetrics) float64 { return m.SuccessPct }),
			P50:         get(func(m PhaseMetrics) float64 { return m.P50S }),
			P95:         get(func(m PhaseMetrics) float64 { return m.P95S }),
			P99:         get(func(m PhaseMetrics) float64 { return m.P99S }),
			Misroutes:   get(func(m PhaseMetrics) float64 { return float64(m.Misroutes) }),
			Leak:        get(func(m PhaseMetrics) float64 { return m.LeakPct }),
			Recover:     get(func(m PhaseMetrics) float64 { return m.RecoverS })}
		var det, rdet []float64
		for _, m := range ms {
			c.RerouteTurns += m.RerouteTurns
			c.RerouteFailed += m.RerouteFailed
			if m.DetectS >= 0 {
				det = append(det, m.DetectS)
				if m.Detected {
					c.Detected++
				}
			}
			if m.RouterDetectS >= 0 {
				rdet = append(rdet, m.RouterDetectS)
			}
		}
		c.Detect, c.HasDetect = NewStat(det), len(det) > 0
		c.RouterDetect, c.HasRouterMark = NewStat(rdet), len(rdet) > 0
		cells = append(cells, c)
	}
	return cells
}

func pm(s Stat, digits int) string { return pmScaled(s, 1, digits) }

// pmScaled is pm of s in other units: mean and half-width times k.
func pmScaled(s Stat, k float64, digits int) string {
	return strconv.FormatFloat(k*s.Mean, 'f', digits, 64) + " ± " + strconv.FormatFloat(k*s.Half, 'f', digits, 64)
}

// Table is the study's summary: means over replicates ± 95% intervals.
func (r *ResilienceResults) Table() report.Table {
	t := report.Table{Title: fmt.Sprintf("resilience study at %g req/s (means over replicates ± 95%% confidence half-widths)", r.RPS),
		Headers: []string{"phase", "policy", "n", "success %", "p50 s", "p95 s", "p99 s", "misroutes", "leak %", "detect s", "recover s"}}
	live := r.Scale > 0
	if live {
		t.Title = fmt.Sprintf("live resilience study at scale %g (%g req/s), live runs beside their simulator twins (means over replicates ± 95%% confidence half-widths)", r.Scale, r.RPS)
		t.Headers = append([]string{"run"}, t.Headers...)
	}
	for _, c := range r.Cells() {
		detect := "-"
		if c.HasDetect {
			detect = pm(c.Detect, 2)
			if c.Detected < c.Detect.N {
				detect += fmt.Sprintf(" (%d/%d)", c.Detected, c.Detect.N)
			}
		}
		leak := "-"
		if c.Phase == "capability" {
			leak = pm(c.Leak, 2)
		}
		row := []string{c.Phase, c.Policy, strconv.Itoa(c.Success.N), pm(c.Success, 2), pm(c.P50, 2), pm(c.P95, 2),
			pm(c.P99, 2), pm(c.Misroutes, 1), leak, detect, pm(c.Recover, 1)}
		if live {
			row = append([]string{c.Mode}, row...)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}

// Criterion is one of the resilience study's acceptance checks, evaluated.
type Criterion struct {
	Mode   string `json:"mode,omitempty"`
	Phase  string `json:"phase"`
	What   string `json:"what"`
	Result string `json:"result"` // pass, tie, fail, or n/a when nothing could be measured
	Detail string `json:"detail"`
}

// Criteria checks pressure against the best baseline in every phase: success
// at least as good everywhere (pass: mean at least the best baseline's; tie:
// below it but inside both intervals), and a lower p95 TTFT in the
// capability, failover, thermal and telemetry-loss phases by more than the
// intervals (pressure's upper end below the best baseline's lower end),
// and, where both ran at least two common seeds, by more than the paired
// interval (the 95% interval of the mean per-seed difference wholly below
// zero; Paired).
//
// Then the resilience targets, on pressure's means: leak rate at most 0.1% and
// long-prompt success at least 99.9% (capability); reroute p99 at most
// 600 ms and success at least 99.9% (failover); success at least 99.95% and
// fallback within 1 s in every replicate (telemetry-loss); a positive lead
// time and no breach (thermal). In a live study each mode is checked on its
// own runs.
func (r *ResilienceResults) Criteria() []Criterion {
	var out []Criterion
	for _, mode := range r.modes() {
		sub := r.only(mode)
		for _, c := range append(sub.criteria(), sub.targets()...) {
			c.Mode = mode
			out = append(out, c)
		}
	}
	return out
}

// targets checks the resilience study's absolute targets on pressure's cells.
func (r *ResilienceResults) targets() []Criterion {
	cells := r.Cells()
	var out []Criterion
	check := func(phase, what string, ok bool, detail string) {
		res := "fail"
		if ok {
			res = "pass"
		}
		out = append(out, Criterion{Phase: phase, What: what, Result: res, Detail: detail})
	}
	if c := findCell(cells, "capability", "pressure"); c != nil {
		check("capability", "target: leak rate <= 0.1%", c.Leak.Mean <= 0.1, fmt.Sprintf("pressure %s%%", pm(c.Leak, 3)))
		check("capability", "target: long-prompt success >= 99.9%", c.LongSuccess.Mean >= 99.9, fmt.Sprintf("pressure %s%%", pm(c.LongSuccess, 2)))
	}
	if c := findCell(cells, "failover", "pressure"); c != nil {
		if c.RerouteTurns == 0 {
			out = append(out, Criterion{Phase: "failover", What: "target: reroute p99 <= 600 ms", Result: "n/a",
				Detail: fmt.Sprintf("the kill caught no turn that then completed (%d caught turns failed)", c.RerouteFailed)})
		} else {
			check("failover", "target: reroute p99 <= 600 ms", c.RerouteP99.Mean <= 0.6,
				fmt.Sprintf("pressure %s ms (p50 %s, p95 %s ms) over the %d turns the kill caught and another backend served; %d caught turns failed",
					pmScaled(c.RerouteP99, 1000, 0), pmScaled(c.RerouteP50, 1000, 0), pmScaled(c.RerouteP95, 1000, 0), c.RerouteTurns, c.RerouteFailed))
		}
		check("failover", "target: post-kill success >= 99.9%", c.Success.Mean >= 99.9, fmt.Sprintf("pressure %s%%", pm(c.Success, 2)))
	}
	if c := findCell(cells, "telemetry-loss", "pressure"); c != nil {
		check("telemetry-loss", "target: success >= 99.95%", c.Success.Mean >= 99.95, fmt.Sprintf("pressure %s%%", pm(c.Success, 3)))
		check("telemetry-loss", "target: fallback within 1 s", c.HasDetect && c.Detected == c.Detect.N && c.Detect.Max <= 1,
			fmt.Sprintf("pressure %s s, at most %.2f s (%d/%d replicates reported it)", pm(c.Detect, 2), c.Detect.Max, c.Detected, c.Success.N))
	}
	if c := findCell(cells, "thermal", "pressure"); c != nil {
		check("thermal", "target: positive lead time, zero breaches", c.Detected == c.Success.N && c.Lead.Lo() > 0 && c.Breaches.Mean == 0,
			fmt.Sprintf("pressure lead %s s (%d/%d replicates detected), breaches %s", pm(c.Lead, 1), c.Detected, c.Success.N, pm(c.Breaches, 1)))
	}
	return out
}

// criteria compares pressure with the best baseline in one mode's runs.
func (r *ResilienceResults) criteria() []Criterion {
	cells, paired := r.Cells(), r.Paired()
	var out []Criterion
	for _, phase := range r.phases() {
		var pr *PhaseCell
		var base []PhaseCell
		for i := range cells {
			if cells[i].Phase != phase {
				continue
			}
			switch cells[i].Policy {
			case "pressure":
				pr = &cells[i]
			case PressureNoNet: // an ablation of pressure, not a baseline
			default:
				base = append(base, cells[i])
			}
		}
		if pr == nil || len(base) == 0 {
			continue
		}
		best := slices.MaxFunc(base, func(a, b PhaseCell) int { return cmpF(a.Success.Mean, b.Success.Mean) })
		res := "fail"
		switch {
		case pr.Success.Mean >= best.Success.Mean:
			res = "pass"
		case pr.Success.Hi() >= best.Success.Lo():
			res = "tie"
		}
		out = append(out, Criterion{Phase: phase, What: "success rate at least the best baseline's", Result: res,
			Detail: fmt.Sprintf("pressure %s%% vs %s %s%%", pm(pr.Success, 2), best.Policy, pm(best.Success, 2))})
		if slices.Contains([]string{"capability", "failover", "thermal", "telemetry-loss"}, phase) {
			bp := slices.MinFunc(base, func(a, b PhaseCell) int { return cmpF(a.P95.Mean, b.P95.Mean) })
			res := "fail"
			if pr.P95.Hi() < bp.P95.Lo() {
				res = "pass"
			}
			out = append(out, Criterion{Phase: phase, What: "p95 TTFT below the best baseline's, beyond the intervals", Result: res,
				Detail: fmt.Sprintf("pressure %s s vs %s %s s", pm(pr.P95, 3), bp.Policy, pm(bp.P95, 3))})
			if d, ok := pairedP95(paired, phase, bp.Policy); ok {
				res := "fail"
				if d.Hi() < 0 {
					res = "pass"
				}
				out = append(out, Criterion{Phase: phase, What: "p95 TTFT below the best baseline's, paired on the same seeds", Result: res,
					Detail: fmt.Sprintf("pressure minus %s %s s over %d seeds", bp.Policy, signedPM(d, 3), d.N)})
			}
		}
	}
	return out
}

// pairedP95 is the paired difference of TTFT p95, pressure minus against,
// in phase, when Paired has it (both ran at least two common seeds).
func pairedP95(ds []PairedDiff, phase, against string) (Stat, bool) {
	for _, d := range ds {
		if d.Phase == phase && d.Policy == "pressure" && d.Against == against && d.Measure == "ttft_p95_s" {
			return d.Diff, true
		}
	}
	return Stat{}, false
}

// cmpF orders floats as < and > do: a NaN compares equal to everything
// (cmp.Compare would order it first).
func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (r *ResilienceResults) phases() []string {
	var names []string
	for _, m := range r.Runs {
		if !slices.Contains(names, m.Phase) {
			names = append(names, m.Phase)
		}
	}
	return names
}

// cell finds a phase and policy's cell.
func findCell(cells []PhaseCell, phase, policy string) *PhaseCell {
	for i := range cells {
		if cells[i].Phase == phase && cells[i].Policy == policy {
			return &cells[i]
		}
	}
	return nil
}

// PaperComparison sets the study's figures beside the Solyx AI Grid paper's headline
// figures for the same phases, in words.
func (r *ResilienceResults) PaperComparison() []string {
	var out []string
	for _, mode := range r.modes() {
		for _, line := range r.only(mode).paperComparison() {
			out = append(out, modeLabel(mode)+line)
		}
	}
	return out
}

func (r *ResilienceResults) paperComparison() []string {
	cells := r.Cells()
	var out []string
	if p, rr, lr := findCell(cells, "capability", "pressure"), findCell(cells, "capability", "round-robin"), findCell(cells, "capability", "least-request"); p != nil && rr != nil && lr != nil {
		out = append(out, fmt.Sprintf("Capability mismatch: leak rate pressure %.2f%%, round-robin %.2f%%, least-request %.2f%% (Solyx AI Grid paper: Solyx 0.43%%, round-robin 32.11%%, least-request 28.71%%); success pressure %.2f%%, round-robin %.2f%%, least-request %.2f%% (Solyx AI Grid paper, long prompts only: 99.57%%, 67.89%%, 71.29%%).",
			p.Leak.Mean, rr.Leak.Mean, lr.Leak.Mean, p.Success.Mean, rr.Success.Mean, lr.Success.Mean))
	}
	if p, rr, lr := findCell(cells, "failover", "pressure"), findCell(cells, "failover", "round-robin"), findCell(cells, "failover", "least-request"); p != nil && rr != nil && lr != nil {
		out = append(out, fmt.Sprintf("Failover: post-kill success pressure %.2f%%, least-request %.2f%%, round-robin %.2f%% (Solyx AI Grid paper: 99.76%%, 98.81%%, 94.12%%); reroute p99 pressure %.0f ms, least-request %.0f ms, round-robin %.0f ms (Solyx AI Grid paper: 1,247, 2,104 and 4,226 ms); routers marked the killed backend Failed %.2f s after the kill (mean; the heartbeat interval is 0.5 s).",
			p.Success.Mean, lr.Success.Mean, rr.Success.Mean, 1000*p.RerouteP99.Mean, 1000*lr.RerouteP99.Mean, 1000*rr.RerouteP99.Mean, p.RouterDetect.Mean))
	}
	if d, t := findCell(cells, "failover", "pressure"), findCell(cells, "failover-ttl500", "pressure"); d != nil && t != nil {
		out = append(out, fmt.Sprintf("Failure detection: with our heartbeat TTL (%v) routers marked the killed backend Failed %.3f s after the kill, with the Solyx AI Grid paper's %v %.3f s (Solyx AI Grid paper: within 500 ms, one heartbeat interval); reroute p99 %.0f ms against %.0f ms, post-kill success %.2f%% against %.2f%% (pressure).",
			router.DefaultHeartbeatTTL, d.RouterDetect.Mean, SolyxHeartbeatTTL, t.RouterDetect.Mean, 1000*d.RerouteP99.Mean, 1000*t.RerouteP99.Mean, d.Success.Mean, t.Success.Mean))
	}
	if p := findCell(cells, "telemetry-loss", "pressure"); p != nil {
		out = append(out, fmt.Sprintf("Telemetry loss: success pressure %.2f%% (Solyx AI Grid paper: 99.90%%); fallback reported %.2f s after the exporters died (Solyx AI Grid paper: 0.82 s).", p.Success.Mean, p.Detect.Mean))
	}
	if p := findCell(cells, "telemetry-loss-each", "pressure"); p != nil {
		out = append(out, fmt.Sprintf("Telemetry loss, one cell at a time: success pressure %.2f%%; fallback reported at most %.2f s after each exporter died (Solyx AI Grid paper, each cell separately: 99.90%%, 0.82 s on average).", p.Success.Mean, p.Detect.Mean))
	}
	if p, lr, rr := findCell(cells, "burst", "pressure"), findCell(cells, "burst", "least-request"), findCell(cells, "burst", "round-robin"); p != nil && lr != nil && rr != nil {
		react := "no weight change recorded"
		if p.HasDetect {
			react = fmt.Sprintf("%.0f ms (%d of %d replicates reacted to every burst)", 1000*p.Detect.Mean, p.Detected, p.Detect.N)
		}
		out = append(out, fmt.Sprintf("Burst: success pressure %.2f%%, least-request %.2f%%, round-robin %.2f%% (Solyx AI Grid paper: 99.43%%, 95.21%%, 81.27%%); routing reaction p95 pressure %s (Solyx AI Grid paper: Solyx 482 ms; least-request and round-robin keep no weights here).",
			p.Success.Mean, lr.Success.Mean, rr.Success.Mean, react))
	}
	if p, rr := findCell(cells, "wan-jitter", "pressure"), findCell(cells, "wan-jitter", "round-robin"); p != nil && rr != nil && rr.P95.Mean > 0 {
		noNet := ""
		if nn := findCell(cells, "wan-jitter", PressureNoNet); nn != nil {
			noNet = fmt.Sprintf(", without the network signals (%s) %.3f s", PressureNoNet, nn.P95.Mean)
		}
		out = append(out, fmt.Sprintf("WAN jitter: TTFT p95 pressure %.3f s%s, round-robin %.3f s (pressure %+.1f%% against round-robin; Solyx AI Grid paper, 20 ms jitter: Solyx 1,142 ms vs round-robin 1,971 ms, -42%%).",
			p.P95.Mean, noNet, rr.P95.Mean, 100*(p.P95.Mean/rr.P95.Mean-1)))
	}
	if p, pw := findCell(cells, "thermal", "pressure"), findCell(cells, "thermal", "pulsar-waw"); p != nil && pw != nil {
		out = append(out, fmt.Sprintf("Thermal: pressure halved the hot backend's dispatch rate %.1f s after the onset (%d of %d replicates; the clock starts to throttle at 10 s); TTFT p95 pressure %.3f s vs pulsar-waw %.3f s (Solyx AI Grid paper: hardware signals lead SLO breach by 11.2 s on average).",
			p.Detect.Mean, p.Detected, p.Detect.N, p.P95.Mean, pw.P95.Mean))
	}
	return out
}

// WriteJSON writes the runs, the cells and the criteria.
func (r *ResilienceResults) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		*ResilienceResults
		Cells    []PhaseCell  `json:"cells"`
		Criteria []Criterion  `json:"criteria"`
		Paper    []string     `json:"paper_comparison"`
		Paired   []PairedDiff `json:"paired"`
	}{r, r.Cells(), r.Criteria(), r.PaperComparison(), r.Paired()})
}

// WriteHTML writes a self-contained report.
func (r *ResilienceResults) WriteHTML(w io.Writer) error {
	p := report.NewPage("Stargate resilience study")
	if r.Scale > 0 {
		p.Paragraph(fmt.Sprintf("Live on the three-site fleet at scale %g (9 backends of 1 GPU, one router per site, all in one process on loopback with the sites' latencies injected) at %g req/s, each run beside its simulator twin of the same scale, workload and seed; every phase injects its fault on the running fleet at the same onset for every policy. Bars show means over replicates; whiskers the 95%% confidence intervals.", r.Scale, r.RPS))
	} else {
		p.Paragraph(fmt.Sprintf("Simulated on the three-site fleet (9 backends of 4 GPUs, one router per site) at %g req/s; every phase injects its fault at the same onset, on the same workload and seeds for every policy. Bars show means over replicates; whiskers the 95%% confidence intervals.", r.RPS))
	}
	if r.Quick {
		p.Paragraph("Quick run: 2 replicates, 30 s measured after the onset. Figures are indicative only.")
	}
	if r.Scale > 0 {
		p.Paragraph("Rows marked live ran on the live fleet, rows marked sim in the simulator; the charts show the live runs.")
	}
	p.Heading("Phases")
	for _, ph := range ResiliencePhases() {
		if slices.Contains(r.phases(), ph.Name) {
			p.Paragraph(ph.Name + ": " + ph.Describe + ".")
		}
	}
	p.Heading("Acceptance checks")
	ct := report.Table{Headers: []string{"phase", "check", "result", "detail"}}
	for _, c := range r.Criteria() {
		ct.Rows = append(ct.Rows, []string{modeLabel(c.Mode) + c.Phase, c.What, c.Result, c.Detail})
	}
	p.Table(ct)
	p.Heading("Against the Solyx AI Grid paper")
	for _, s := range r.PaperComparison() {
		p.Paragraph(s)
	}
	cells := r.Cells()
	if r.Scale > 0 {
		cells = r.only("live").Cells()
	}
	p.Chart(r.phaseChart(cells, "Success rate by phase", "success (%)", func(c PhaseCell) Stat { return c.Success }).SVG())
	p.Chart(r.phaseChart(cells, "TTFT p95 by phase", "TTFT p95 (s)", func(c PhaseCell) Stat { return c.P95 }).SVG())
	p.Heading("All cells")
	p.Table(r.Table())
	return p.Write(w)
}

func (r *ResilienceResults) phaseChart(cells []PhaseCell, title, ylabel string, f func(PhaseCell) Stat) report.BarChart {
	ch := report.BarChart{Title: title, XLabel: "phase", YLabel: ylabel}
	phases := r.phases()
	ch.Categories = phases
	var pols []string
	for _, c := range cells {
		if !slices.Contains(pols, c.Policy) {
			pols = append(pols, c.Policy)
		}
	}
	for _, pol := range pols {
		s := report.BarSeries{Name: pol}
		for _, ph := range phases {
			bar := report.Bar{}
			if c := findCell(cells, ph, pol); c != nil {
				st := f(*c)
				bar = report.Bar{Value: st.Mean, Lo: st.Lo(), Hi: st.Hi(), HasRange: st.N > 1}
			}
			s.Bars = append(s.Bars, bar)
		}
		ch.Series = append(ch.Series, s)
	}
	return ch
}

// WriteFiles writes results.json, report.html and table.txt into dir.
func (r *ResilienceResults) WriteFiles(dir string) error {
	return writeReport(dir, r)
}
