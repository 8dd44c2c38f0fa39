package study

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/telemetry"
)

// The Solyx AI Grid paper's DCGM lead time: under a thermal or PCIe stress
// on one cell, the time from the pressure score crossing a preconfigured
// alert threshold to the point at which the TTFT p95 crosses the SLO. The
// paper gives no value for its threshold; ours are fixed here, named, and
// checked against the fault-free span before the onset (LeadTime.FalseAlerts).
const (
	// LeadAlertScore is the pressure alert threshold: the faulted
	// backend's pressure score at or above it is an alert. The score is
	// computed from the backend's own telemetry report (no router load
	// counts, no path) with telemetry's documented weights and levels
	// (policy.UntunedPressureParams: the ten signals and the thermal
	// pressure, weighted 0.60). An alert is a monitoring rule, not a
	// routing weight: the tuned routing weights (policy.DefaultPressureParams)
	// give heat no weight, and their score of a throttled backend stays
	// near 0.3, so they would never alert. 0.5 was fixed before any lead
	// was measured (the weights were chosen after seeing the tuned score
	// stay below it); before the onset the faulted backend scores
	// 0.10-0.30 under pressure and pulsar-waw.
	LeadAlertScore = 0.5
	// LeadAlertTempC, LeadAlertClock and LeadAlertPCIeBps are the
	// hardware-signal alert thresholds on the DCGM fields themselves: the
	// hottest GPU at or above telemetry.DefaultNorm's TempOK (where the
	// thermal pressure starts), the slowest SM clock below 95% of nominal,
	// or a GPU's PCIe throughput (sent plus received) at or above half of
	// a Gen5 x16 link one way.
	LeadAlertTempC   = 75.0
	LeadAlertClock   = 0.95
	LeadAlertPCIeBps = 32e9
	// LeadBreachWindow is the span of the TTFT p95 that defines a breach
	// (the gateway's TTFT window), and LeadBreachMinTurns the fewest turns
	// in it for a p95 to count.
	LeadBreachWindow   = 10 * time.Second
	LeadBreachMinTurns = 5
)

// leadPhase reports whether a phase measures the Solyx AI Grid paper's lead
// time (its thermal and PCIe-stress faults).
func leadPhase(p Phase) bool { return p.kind() == "thermal" || p.kind() == "pcie" }

// PCIeShare, PCIeRamp and PCIeSlowdown shape the pcie phase's fault: the
// stressor takes 80% of the backend's PCIe links, growing over 20 s, and
// its steps cost up to 2.5 times as much (the thermal phase's worst, at a
// 40% clock).
const (
	PCIeShare    = 0.8
	PCIeRamp     = 20 * time.Second
	PCIeSlowdown = 2.5
)

// pciePhase is the Solyx AI Grid paper's PCIe contention (stress-ng) on one
// backend. It is optional: the whole study's figures stay as they were.
func pciePhase() Phase {
	return Phase{Name: "pcie", Faulty: []int{faultyBackend}, Optional: true, SimOnly: true,
		Describe: fmt.Sprintf("PCIe contention on backend %d: a stressor's traffic takes up to %.0f%% of each GPU's PCIe link over %v, and every step costs up to %gx as much along the same ramp (the Solyx AI Grid paper's stress-ng PCIe stress)", faultyBackend, PCIeShare*100, PCIeRamp, PCIeSlowdown),
		Faults: func(at time.Duration) []sim.Fault {
			return []sim.Fault{{Kind: sim.FaultPCIe, Backends: []int{faultyBackend}, At: at, Ramp: PCIeRamp, Share: PCIeShare, Slowdown: PCIeSlowdown}}
		}}
}

// LeadTime is one run's lead time the Solyx AI Grid paper's way. Times are
// seconds from the onset; -1 means never (in the measured span).
type LeadTime struct {
	// AlertS is when the faulted backend's pressure score first reached
	// LeadAlertScore; HWAlertS when a DCGM field first crossed its
	// hardware alert threshold.
	AlertS   float64 `json:"alert_s"`
	HWAlertS float64 `json:"hw_alert_s"`
	// BreachS is when the TTFT p95 of the turns the faulted backend
	// served, over the last LeadBreachWindow, first exceeded the SLO.
	BreachS float64 `json:"breach_s"`
	// LeadS is BreachS - AlertS, and HWLeadS BreachS - HWAlertS; when no
	// breach came (Censored) they run to the end of the span instead, a
	// lower bound. -1: no alert.
	LeadS    float64 `json:"lead_s"`
	HWLeadS  float64 `json:"hw_lead_s"`
	Censored bool    `json:"censored"`
	// FalseAlerts counts the reports before the onset (in the fault-free
	// reference span) at or above LeadAlertScore.
	FalseAlerts int `json:"false_alerts"`
}

// AlertSample is one telemetry report reduced to what the alerts read.
type AlertSample struct {
	At    time.Duration
	Score float64
	// HW: a DCGM field crossed its hardware alert threshold.
	HW bool
}

// TurnTTFT is one turn on the faulted backend: when it ended and its TTFT
// (+Inf when it failed).
type TurnTTFT struct {
	End  time.Duration
	TTFT float64 // seconds
}

// alertSamples reduces the faulted backends' reports to alert samples.
func alertSamples(ss []sim.SignalSample, faulty []int) []AlertSample {
	pp := policy.UntunedPressureParams()
	var out []AlertSample
	for i := range ss {
		if !slices.Contains(faulty, ss[i].Backend) {
			continue
		}
		sig := &ss[i].Signals
		p, avail := telemetry.Normalise(sig, telemetry.Load{}, telemetry.Path{}, pp.Norm)
		score, _ := telemetry.Score(p, avail, pp.Weights)
		hw := sig.Hardware && (sig.TempC >= LeadAlertTempC || sig.PCIeBps >= LeadAlertPCIeBps ||
			(sig.MaxSMClockMHz > 0 && sig.SMClockMHz > 0 && sig.SMClockMHz < LeadAlertClock*sig.MaxSMClockMHz))
		out = append(out, AlertSample{At: sig.At, Score: score, HW: hw})
	}
	return out
}

// faultedTurns are the turns that ended on a faulted backend, in end order.
func faultedTurns(recs []metrics.TurnRecord, faulty []int) []TurnTTFT {
	var out []TurnTTFT
	for i := range recs {
		rec := &recs[i]
		if rec.Backend < 0 || !slices.Contains(faulty, rec.Backend) {
			continue
		}
		t := math.Inf(1)
		if rec.Completed {
			t = rec.TTFT().Seconds()
		}
		out = append(out, TurnTTFT{End: rec.End, TTFT: t})
	}
	slices.SortStableFunc(out, func(a, b TurnTTFT) int { return cmp.Compare(a.End, b.End) })
	return out
}

// ComputeLeadTime measures the lead time over [from, to) from the faulted
// backend's alert samples and turns (sorted by time), against the TTFT SLO.
func ComputeLeadTime(alerts []AlertSample, turns []TurnTTFT, from, to, slo time.Duration) LeadTime {
	lt := LeadTime{AlertS: -1, HWAlertS: -1, BreachS: -1, LeadS: -1, HWLeadS: -1}
	sec := func(at time.Duration) float64 { return (at - from).Seconds() }
	for _, a := range alerts {
		switch {
		case a.At < from:
			if a.Score >= LeadAlertScore {
				lt.FalseAlerts++
			}
		case a.At < to:
			if lt.AlertS < 0 && a.Score >= LeadAlertScore {
				lt.AlertS = sec(a.At)
			}
			if lt.HWAlertS < 0 && a.HW {
				lt.HWAlertS = sec(a.At)
			}
		}
	}
	var win []float64
	lo := 0
	for i, t := range turns {
		if t.End < from {
			continue
		}
		if t.End >= to {
			break
		}
		for lo < i && turns[lo].End <= t.End-LeadBreachWindow {
			lo++
		}
		win = win[:0]
		for _, u := range turns[lo : i+1] {
			win = append(win, u.TTFT)
		}
		if len(win) < LeadBreachMinTurns {
			continue
		}
		slices.Sort(win)
		if p95 := metrics.Percentile(win, 0.95); p95 > slo.Seconds() {
			lt.BreachS = sec(t.End)
			break
		}
	}
	end := lt.BreachS
	if end < 0 {
		end, lt.Censored = (to - from).Seconds(), true
	}
	if lt.AlertS >= 0 {
		lt.LeadS = end - lt.AlertS
	}
	if lt.HWAlertS >= 0 {
		lt.HWLeadS = end - lt.HWAlertS
	}
	return lt
}

// measureLead is a run's LeadTime; nil outside the lead phases or without
// telemetry reports (a live run).
func measureLead(r PhaseRun) *LeadTime {
	sp := r.Spec
	if !leadPhase(sp.Phase) || len(r.Signals) == 0 {
		return nil
	}
	lt := ComputeLeadTime(alertSamples(r.Signals, sp.Phase.Faulty), faultedTurns(r.Records, sp.Phase.Faulty),
		sp.Onset, sp.Onset+sp.Post, r.SLO)
	return &lt
}

// LeadLines set the Solyx AI Grid paper's lead time beside ours (PhaseMetrics.LeadS),
// phase by phase and policy by policy: means over the replicates with an
// alert, and how many breached.
func (r *ResilienceResults) LeadLines() []string {
	type key struct{ phase, policy, mode string }
	var order []key
	groups := map[key][]PhaseMetrics{}
	for _, m := range r.Runs {
		if m.Extra == nil || m.Extra.Lead == nil {
			continue
		}
		k := key{m.Phase, m.Policy, m.Mode}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], m)
	}
	var lines []string
	if len(order) > 0 {
		lines = append(lines, fmt.Sprintf("DCGM lead time the Solyx AI Grid paper's way: pressure score >= %g (hardware: temp >= %g C, clock < %g x nominal or PCIe >= %g GB/s) to the faulted backend's TTFT p95 over %v above the SLO; \">=\" marks a censored mean (no breach: the lead runs to the end of the span)",
			LeadAlertScore, LeadAlertTempC, LeadAlertClock, LeadAlertPCIeBps/1e9, LeadBreachWindow))
	}
	for _, k := range order {
		ms := groups[k]
		var alert, hwAlert, breach, lead, hwLead, ours []float64
		breaches, noAlert, falseAlerts := 0, 0, 0
		for _, m := range ms {
			lt := m.Extra.Lead
			falseAlerts += lt.FalseAlerts
			if lt.BreachS >= 0 {
				breaches++
				breach = append(breach, lt.BreachS)
			}
			if lt.AlertS < 0 {
				noAlert++
			} else {
				alert = append(alert, lt.AlertS)
				lead = append(lead, lt.LeadS)
			}
			if lt.HWAlertS >= 0 {
				hwAlert = append(hwAlert, lt.HWAlertS)
				hwLead = append(hwLead, lt.HWLeadS)
			}
			if m.LeadS >= 0 {
				ours = append(ours, m.LeadS)
			}
		}
		censored := len(ms) - breaches
		mark := func(vs []float64) string {
			if len(vs) == 0 {
				return "-"
			}
			s := NewStat(vs)
			prefix := ""
			if censored > 0 {
				prefix = ">="
			}
			return fmt.Sprintf("%s%.1f ± %.1f s", prefix, s.Mean, s.Half)
		}
		plain := func(vs []float64) string {
			if len(vs) == 0 {
				return "-"
			}
			s := NewStat(vs)
			return fmt.Sprintf("%.1f ± %.1f s", s.Mean, s.Half)
		}
		lines = append(lines, fmt.Sprintf("%s%s %s: alert %s after the onset (%d/%d runs), hardware alert %s; breach %s (%d/%d runs breached); lead %s, hardware lead %s (%d censored); ours (share halved to breach or end) %s; false alerts before the onset %d",
			modeLabel(k.mode), k.phase, k.policy, plain(alert), len(ms)-noAlert, len(ms), plain(hwAlert), plain(breach), breaches, len(ms),
			mark(lead), mark(hwLead), censored, plain(ours), falseAlerts))
	}
	return lines
}
