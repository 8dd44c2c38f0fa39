package study

import (
	"fmt"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/sim"
)

// RestartEngineDown is how long the restart phase's engine is gone: from
// the onset until it serves again (its death and its model load). The
// gateway then keeps the backend Loading for its warm-up
// (gateway.DefaultWarmUp).
const RestartEngineDown = 10 * time.Second

// lifecyclePhases are the phases of the engine lifecycle (the Solyx AI Grid
// paper's cold-start cascade during failover).
func lifecyclePhases() []Phase {
	return []Phase{
		{Name: "restart", Faulty: []int{faultyBackend}, SimOnly: true,
			Describe: fmt.Sprintf("backend %d's engine dies under load and serves again %v later; its gateway reports Loading from the death through a %v warm-up, then Ready", faultyBackend, RestartEngineDown, gateway.DefaultWarmUp),
			Faults: func(at time.Duration) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultRestart, Backends: []int{faultyBackend}, At: at, Until: at + RestartEngineDown}}
			}},
	}
}

// NetworkArms are the Solyx AI Grid paper's three arms of its
// network-aware placement evaluation: round-robin, Solyx-gpu-only (its
// eight hardware and application signals: PressureNoNet) and
// Solyx-10-signal (pressure).
var NetworkArms = []string{"round-robin", PressureNoNet, "pressure"}

// The network sub-phases' loads, as shares of ResilienceRPS: near idle, and
// near saturation.
const (
	nearIdleLoad   = 0.2
	saturationLoad = 1.4 // set before measuring; see docs/solyx.md
	// netJitter is the jitter sub-phase's mean exponential delay each way.
	netJitter = 20 * time.Millisecond
	// jitterBeforeRecovery is how long the recovery sub-phase's jitter
	// lasts before it ends at the onset.
	jitterBeforeRecovery = 60 * time.Second
)

// networkPhases are the Solyx AI Grid paper's five network sub-phases, each
// run with its three arms (NetworkArms).
func networkPhases() []Phase {
	none := func(time.Duration) []sim.Fault { return nil }
	jitter := func(at time.Duration) []sim.Fault {
		return []sim.Fault{{Kind: sim.FaultPath, Backends: westSite, At: at, Jitter: netJitter}}
	}
	phases := []Phase{
		{Name: "net-near-idle", Load: nearIdleLoad, Arms: NetworkArms, Faults: none,
			Describe: fmt.Sprintf("no fault at %.0f%% of the study's rate (the Solyx AI Grid paper's near_idle)", nearIdleLoad*100)},
		{Name: "net-symmetric", Arms: NetworkArms, Faults: none,
			Describe: "no fault at the study's rate, every path as the sites' latencies make it (the Solyx AI Grid paper's symmetric)"},
		{Name: "net-saturation", Load: saturationLoad, Arms: NetworkArms, Faults: none,
			Describe: fmt.Sprintf("no fault at %.0f%% of the study's rate, near saturation (the Solyx AI Grid paper's saturation)", saturationLoad*100)},
		{Name: "net-jitter-20ms", Base: "wan-jitter", Faulty: westSite, Arms: NetworkArms, Faults: jitter,
			Describe: fmt.Sprintf("the west site's paths gain an exponential delay of mean %v each way at the onset (the Solyx AI Grid paper's jitter 20ms)", netJitter)},
		{Name: "net-recovery", Faulty: westSite, Arms: NetworkArms, SimOnly: true,
			Describe: fmt.Sprintf("the west site's %v jitter, on for %v, ends at the onset (the Solyx AI Grid paper's recovery)", netJitter, jitterBeforeRecovery),
			Faults: func(at time.Duration) []sim.Fault {
				return []sim.Fault{{Kind: sim.FaultPath, Backends: westSite, At: at - jitterBeforeRecovery, Until: at, Jitter: netJitter}}
			}},
	}
	for i := range phases {
		phases[i].Optional = true // 75 runs: run them as --phase network
	}
	return phases
}

// NetworkPhaseGroup names the five network sub-phases at once (--phase network).
const NetworkPhaseGroup = "network"

// expandPhaseGroups replaces NetworkPhaseGroup in a phase list by the
// network sub-phases.
func expandPhaseGroups(names []string) []string {
	i := slices.Index(names, NetworkPhaseGroup)
	if i < 0 {
		return names
	}
	var net []string
	for _, p := range networkPhases() {
		net = append(net, p.Name)
	}
	return slices.Concat(names[:i], net, expandPhaseGroups(names[i+1:]))
}

// solyxNetwork is the Solyx AI Grid paper's Table 7: P95 TTFT in ms of
// round-robin, Solyx-gpu-only and Solyx-10-signal per sub-phase.
var solyxNetwork = map[string][3]float64{
	"net-near-idle":   {587, 562, 491},
	"net-symmetric":   {712, 678, 547},
	"net-saturation":  {1842, 1247, 901},
	"net-jitter-20ms": {1971, 1583, 1142},
	"net-recovery":    {824, 712, 561},
}

// NetworkLines sets the network sub-phases' TTFT p95 per arm beside the
// Solyx AI Grid paper's, with the network signals' gain (gpu-only to
// 10-signal) of each.
func (r *ResilienceResults) NetworkLines() []string {
	type key struct{ phase, policy, mode string }
	cells := map[key]PhaseCell{}
	for _, c := range r.Cells() {
		cells[key{c.Phase, c.Policy, c.Mode}] = c
	}
	var lines []string
	for _, mode := range r.modes() {
		for _, ph := range networkPhases() {
			var p95 [3]Stat
			have := true
			for i, arm := range NetworkArms {
				c, ok := cells[key{ph.Name, arm, mode}]
				have = have && ok
				p95[i] = c.P95
			}
			if !have {
				continue
			}
			if len(lines) == 0 {
				lines = append(lines, "network sub-phases, TTFT p95 s (round-robin / gpu-only / 10-signal; net gain) against the Solyx AI Grid paper's:")
			}
			paper := solyxNetwork[ph.Name]
			gain := 0.0
			if p95[1].Mean > 0 {
				gain = 100 * (p95[1].Mean - p95[2].Mean) / p95[1].Mean
			}
			lines = append(lines, fmt.Sprintf("%s%-16s %.2f ± %.2f / %.2f ± %.2f / %.2f ± %.2f; gain %.1f%%   (paper %.3f / %.3f / %.3f; gain %.1f%%)",
				modeLabel(mode), ph.Name, p95[0].Mean, p95[0].Half, p95[1].Mean, p95[1].Half, p95[2].Mean, p95[2].Half, gain,
				paper[0]/1000, paper[1]/1000, paper[2]/1000, 100*(paper[1]-paper[2])/paper[1]))
		}
	}
	return lines
}

// PhaseExtras are the measures of the phases and checks added for the
// seeds' experiments, beside PhaseMetrics' own.
type PhaseExtras struct {
	// E2E*S are the end-to-end latency percentiles (start to last token)
	// of the turns that completed in the measured span, beside
	// PhaseMetrics' TTFT ones.
	E2EP50S float64 `json:"e2e_p50_s"`
	E2EP95S float64 `json:"e2e_p95_s"`
	E2EP99S float64 `json:"e2e_p99_s"`
	// MaxGapS is the longest time between two consecutive turn ends in
	// [onset - pre, onset + post): the Solyx AI Grid paper's inter-sample
	// gap, which must stay within MaxSampleGap (CheckGaps).
	MaxGapS float64 `json:"max_gap_s"`
	// Restart phase: the TTFT p95 and SLO attainment (completed within the
	// SLO) of the turns the other backends served after the onset (and the
	// p95 of those after the backend was Ready again), and before it (the run's own fault-free reference); the dispatches to
	// the restarting backend while it was Loading (from the onset until
	// RestartEngineDown + the warm-up, less one network latency of
	// grace for the routers to hear), and when it got traffic again, from
	// the onset.
	OthersP95S        float64 `json:"others_ttft_p95_s,omitempty"`
	OthersReadyP95S   float64 `json:"others_ready_ttft_p95_s,omitempty"`
	OthersPreP95S     float64 `json:"others_pre_ttft_p95_s,omitempty"`
	OthersGoodPct     float64 `json:"others_slo_pct,omitempty"`
	OthersPreGoodPct  float64 `json:"others_pre_slo_pct,omitempty"`
	LoadingDispatches int     `json:"loading_dispatches,omitempty"`
	BackS             float64 `json:"back_s,omitempty"`
	// Lead is the Solyx AI Grid paper's lead time (thermal and pcie
	// phases, simulator runs).
	Lead *LeadTime `json:"lead,omitempty"`
}

// loadingGrace is how long after a state change a router may still act on
// the old one: the farthest region's one-way latency (30 ms) and a
// coalesced stats message (10 ms), rounded up.
const loadingGrace = 50 * time.Millisecond

// MaxSampleGap is the Solyx AI Grid paper's data-integrity bound: no gap
// between two samples of a run longer than 5 s.
const MaxSampleGap = 5 * time.Second

// measureExtras computes a run's PhaseExtras.
func measureExtras(r PhaseRun) *PhaseExtras {
	sp := r.Spec
	from, to := sp.Onset, sp.Onset+sp.Post
	x := &PhaseExtras{}
	var e2e []float64
	var ends []time.Duration
	for i := range r.Records {
		rec := &r.Records[i]
		if rec.End >= from-sp.Pre && rec.End < to {
			ends = append(ends, rec.End)
		}
		if rec.End >= from && rec.End < to && rec.Completed {
			e2e = append(e2e, (rec.End - rec.Start).Seconds())
		}
	}
	slices.Sort(e2e)
	x.E2EP50S, x.E2EP95S, x.E2EP99S = metrics.Percentile(e2e, 0.5), metrics.Percentile(e2e, 0.95), metrics.Percentile(e2e, 0.99)
	x.MaxGapS = maxGap(ends).Seconds()
	x.Lead = measureLead(r)
	if sp.Phase.Name != "restart" {
		return x
	}
	x.BackS = -1
	x.OthersP95S, x.OthersGoodPct = othersTTFT(r.Records, sp.Phase.Faulty, r.SLO, from, to)
	x.OthersPreP95S, x.OthersPreGoodPct = othersTTFT(r.Records, sp.Phase.Faulty, r.SLO, from-sp.Pre, from)
	ready := from + RestartEngineDown + gateway.DefaultWarmUp
	x.OthersReadyP95S, _ = othersTTFT(r.Records, sp.Phase.Faulty, r.SLO, ready, to)
	for _, d := range r.Dispatches {
		if !slices.Contains(sp.Phase.Faulty, d.Backend) {
			continue
		}
		if d.At >= from+loadingGrace && d.At < ready {
			x.LoadingDispatches++
		}
		if d.At >= ready && x.BackS < 0 {
			x.BackS = (d.At - from).Seconds()
		}
	}
	return x
}

// othersTTFT is the TTFT p95 (seconds) and SLO attainment (%) of the turns
// that ended in [from, to) on a backend not in faulty.
func othersTTFT(recs []metrics.TurnRecord, faulty []int, slo time.Duration, from, to time.Duration) (p95, goodPct float64) {
	var ttfts []float64
	turns, good := 0, 0
	for i := range recs {
		rec := &recs[i]
		if rec.End < from || rec.End >= to || rec.Backend < 0 || slices.Contains(faulty, rec.Backend) {
			continue
		}
		turns++
		if rec.Completed {
			ttfts = append(ttfts, rec.TTFT().Seconds())
		}
		if slo > 0 && rec.Good(slo) {
			good++
		}
	}
	slices.Sort(ttfts)
	return metrics.Percentile(ttfts, 0.95), pct(good, turns)
}

// phaseKey names the replicates of one phase, policy and mode.
type phaseKey struct{ phase, policy, mode string }

// extraGroups gathers the runs that carry PhaseExtras by phase, policy and
// mode, in the order each group first appears.
func (r *ResilienceResults) extraGroups() ([]phaseKey, map[phaseKey][]PhaseMetrics) {
	var order []phaseKey
	groups := map[phaseKey][]PhaseMetrics{}
	for _, m := range r.Runs {
		if m.Extra == nil {
			continue
		}
		k := phaseKey{m.Phase, m.Policy, m.Mode}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m)
	}
	return order, groups
}

// SeedLines sets out the measures of PhaseExtras, phase by phase and
// policy by policy (means over replicates with 95% intervals), beside the
// bounds they are judged by.
func (r *ResilienceResults) SeedLines() []string {
	cells := map[phaseKey]PhaseCell{}
	for _, c := range r.Cells() {
		cells[phaseKey{c.Phase, c.Policy, c.Mode}] = c
	}
	order, groups := r.extraGroups()
	lines := append(r.latencyLines(), r.LeadLines()...)
	for _, k := range order {
		ms := groups[k]
		get := func(f func(*PhaseExtras) float64) Stat {
			vs := make([]float64, len(ms))
			for i, m := range ms {
				vs[i] = f(m.Extra)
			}
			return NewStat(vs)
		}
		if k.phase != "restart" {
			continue
		}
		post, ready := get(func(x *PhaseExtras) float64 { return x.OthersP95S }), get(func(x *PhaseExtras) float64 { return x.OthersReadyP95S })
		pre := get(func(x *PhaseExtras) float64 { return x.OthersPreP95S })
		good, preGood := get(func(x *PhaseExtras) float64 { return x.OthersGoodPct }), get(func(x *PhaseExtras) float64 { return x.OthersPreGoodPct })
		loading, back := get(func(x *PhaseExtras) float64 { return float64(x.LoadingDispatches) }), get(func(x *PhaseExtras) float64 { return x.BackS })
		// The bounds: losing the backend for good (the failover phase) moves
		// its sessions, which pay their prefill again elsewhere, so it is
		// the bound for the other backends if it ran; else the baseline
		// phase; else the run's own fault-free 30 s before the onset. SLO
		// attainment is bounded by the runs' own 30 s before the onset.
		bound, boundGood, from := pre.Hi(), preGood.Lo(), "30 s before the onset"
		for _, ph := range []string{"baseline", "failover"} {
			if c, ok := cells[phaseKey{ph, k.policy, k.mode}]; ok {
				bound, from = c.P95.Hi(), ph+" phase"
			}
		}
		verdict := "no cascade"
		if post.Mean > bound || good.Mean < boundGood {
			verdict = "CASCADE"
		}
		lines = append(lines, fmt.Sprintf("%srestart %s: other backends' TTFT p95 %.2f ± %.2f s after the death, %.2f ± %.2f s once Ready again, %.2f s before (bound %.2f s, %s); SLO %.2f%% (bound %.2f%%): %s; %.1f dispatches to the Loading backend; traffic back %.1f ± %.1f s after the death (engine down %v, warm-up %v)",
			modeLabel(k.mode), k.policy, post.Mean, post.Half, ready.Mean, ready.Half, pre.Mean, bound, from, good.Mean, boundGood, verdict, loading.Mean, back.Mean, back.Half, RestartEngineDown, gateway.DefaultWarmUp))
	}
	return lines
}

// maxGap is the longest time between two consecutive instants of ts (which
// it sorts); 0 with fewer than two.
func maxGap(ts []time.Duration) time.Duration {
	slices.Sort(ts)
	var most time.Duration
	for i := 1; i < len(ts); i++ {
		most = max(most, ts[i]-ts[i-1])
	}
	return most
}

// CheckGaps fails the study when a run's samples have a gap longer than
// MaxSampleGap (the Solyx AI Grid paper's data-integrity check), naming
// each such run.
func (r *ResilienceResults) CheckGaps() error {
	var bad []string
	for _, m := range r.Runs {
		if m.Extra != nil && m.Extra.MaxGapS > MaxSampleGap.Seconds() {
			bad = append(bad, fmt.Sprintf("%s%s %s seed %d: %.2f s", modeLabel(m.Mode), m.Phase, m.Policy, m.Seed, m.Extra.MaxGapS))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("study: data integrity: %d runs have a gap between samples longer than %v: %v", len(bad), MaxSampleGap, bad)
	}
	return nil
}

// latencyLines sets E2E latency percentiles beside TTFT's for every phase
// and policy, with the longest inter-sample gap of its runs.
func (r *ResilienceResults) latencyLines() []string {
	order, groups := r.extraGroups()
	if len(order) == 0 {
		return nil
	}
	lines := []string{fmt.Sprintf("TTFT and E2E latency (s, means over replicates) and the longest gap between samples (bound %v):", MaxSampleGap)}
	for _, k := range order {
		ms := groups[k]
		get := func(f func(PhaseMetrics) float64) float64 {
			var sum float64
			for _, m := range ms {
				sum += f(m)
			}
			return sum / float64(len(ms))
		}
		gap := 0.0
		for _, m := range ms {
			gap = max(gap, m.Extra.MaxGapS)
		}
		lines = append(lines, fmt.Sprintf("  %s%-20s %-16s TTFT p50 %.2f p95 %.2f p99 %.2f | E2E p50 %.2f p95 %.2f p99 %.2f | gap %.2f",
			modeLabel(k.mode), k.phase, k.policy,
			get(func(m PhaseMetrics) float64 { return m.P50S }), get(func(m PhaseMetrics) float64 { return m.P95S }), get(func(m PhaseMetrics) float64 { return m.P99S }),
			get(func(m PhaseMetrics) float64 { return m.Extra.E2EP50S }), get(func(m PhaseMetrics) float64 { return m.Extra.E2EP95S }), get(func(m PhaseMetrics) float64 { return m.Extra.E2EP99S }),
			gap))
	}
	return lines
}

// fleetGPUs counts a fleet's GPUs and backends.
func fleetGPUs(f *config.Fleet) (gpus, backends int) {
	for _, r := range f.Regions {
		for _, b := range r.Backends {
			n := max(b.Count, 1)
			gpus += n * b.GPUs
			backends += n
		}
	}
	return gpus, backends
}

// fleetRate checks that every phase's faults name backends of fleet f and
// returns the study's rate on it: rps if set, else ResilienceRPS per GPU of
// ResilienceFleet times f's GPUs.
func fleetRate(f *config.Fleet, rps float64, phases []Phase) (float64, error) {
	gpus, backends := fleetGPUs(f)
	if gpus == 0 {
		return 0, fmt.Errorf("%w: fleet %s has no GPU", ErrBadOptions, f.Name)
	}
	for _, ph := range phases {
		for _, ft := range ph.Faults(time.Hour) {
			for _, b := range append(slices.Clone(ft.Backends), ph.Faulty...) {
				if b >= backends {
					return 0, fmt.Errorf("%w: phase %q needs backend index %d, fleet %s has %d backends; choose other phases with --phase", ErrBadOptions, ph.Name, b, f.Name, backends)
				}
			}
		}
	}
	if rps < 0 {
		return 0, fmt.Errorf("%w: rate must be >= 0 (0: the study's rate per GPU), got %v", ErrBadOptions, rps)
	}
	if rps > 0 {
		return rps, nil
	}
	studyGPUs, _ := fleetGPUs(ResilienceFleet())
	return ResilienceRPS * float64(gpus) / float64(studyGPUs), nil
}
