package study

import (
	"fmt"
	"slices"
	"time"

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

// PhaseExtras are the measures of the phases and checks added for the
// seeds' experiments, beside PhaseMetrics' own.
type PhaseExtras struct {
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
}

// loadingGrace is how long after a state change a router may still act on
// the old one: the farthest region's one-way latency (30 ms) and a
// coalesced stats message (10 ms), rounded up.
const loadingGrace = 50 * time.Millisecond

// measureExtras computes the PhaseExtras a run's phase has (nil: none).
func measureExtras(r PhaseRun) *PhaseExtras {
	sp := r.Spec
	if sp.Phase.Name != "restart" {
		return nil
	}
	from, to := sp.Onset, sp.Onset+sp.Post
	x := &PhaseExtras{BackS: -1}
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

// SeedLines sets out the measures of PhaseExtras, phase by phase and
// policy by policy (means over replicates with 95% intervals), beside the
// bounds they are judged by.
func (r *ResilienceResults) SeedLines() []string {
	type key struct{ phase, policy, mode string }
	var order []key
	groups := map[key][]*PhaseExtras{}
	cells := map[key]PhaseCell{}
	for _, c := range r.Cells() {
		cells[key{c.Phase, c.Policy, c.Mode}] = c
	}
	for _, m := range r.Runs {
		if m.Extra == nil {
			continue
		}
		k := key{m.Phase, m.Policy, m.Mode}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m.Extra)
	}
	var lines []string
	for _, k := range order {
		xs := groups[k]
		get := func(f func(*PhaseExtras) float64) Stat {
			vs := make([]float64, len(xs))
			for i, x := range xs {
				vs[i] = f(x)
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
		// phase; else the run's own fault-free 30 s before the onset.
		bound, boundGood, from := pre.Hi(), preGood.Lo(), "30 s before the onset"
		for _, ph := range []string{"baseline", "failover"} {
			if c, ok := cells[key{ph, k.policy, k.mode}]; ok {
				bound, boundGood, from = c.P95.Hi(), min(preGood.Lo(), c.Success.Lo()), ph+" phase"
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
