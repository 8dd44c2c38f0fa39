package study

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/telemetry"
)

// TuneParam is one coordinate of the pressure tuning search: a named
// setting of the pressure policy's scoring and the values the search tries.
type TuneParam struct {
	Name   string
	Values []float64
	Get    func(pp *policy.PressureParams) float64
	Set    func(pp *policy.PressureParams, v float64)
}

// weightParam is the coordinate of one or more signal weights, set together.
func weightParam(name string, values []float64, sigs ...telemetry.Signal) TuneParam {
	return TuneParam{Name: name, Values: values,
		Get: func(pp *policy.PressureParams) float64 { return pp.Weights[sigs[0]] },
		Set: func(pp *policy.PressureParams, v float64) {
			for _, s := range sigs {
				pp.Weights[s] = v
			}
		}}
}

// PressureTuneSpace is the search's coordinates, in the order the search
// visits them: the weights of the router's own queue signal and of the
// reported ones, the hysteresis, the levels of the queue, the busy share
// and TTFT, and when a session leaves the backend holding its cache (the
// score above which it moves, and the re-prefill rate of the cost
// comparison; policy.StickyParams). Whatever the errors weight, a backend at full error pressure is
// at the minimum level (Pressure), so the search cannot trade that away.
func PressureTuneSpace() []TuneParam {
	return []TuneParam{
		weightParam("w.queue", []float64{0, 0.1, 0.25, 0.5, 1}, telemetry.SigQueue),
		weightParam("w.ttft", []float64{0, 0.1, 0.25, 0.5}, telemetry.SigTTFT),
		weightParam("w.kv", []float64{0, 0.1, 0.25}, telemetry.SigKV),
		weightParam("w.hardware-load", []float64{0, 0.02, 0.05, 0.1}, telemetry.SigGPU, telemetry.SigMem, telemetry.SigSM, telemetry.SigDRAM),
		weightParam("w.errors", []float64{0.5, 1}, telemetry.SigErrors),
		weightParam("w.thermal", []float64{0, 0.2, 0.4, 0.6, 0.8, 1}, telemetry.SigThermal),
		weightParam("w.rtt", []float64{0, 0.05, 0.1, 0.25}, telemetry.SigRTT),
		weightParam("w.jitter", []float64{0, 0.1, 0.25, 0.5, 1}, telemetry.SigJitter),
		{Name: "hysteresis", Values: []float64{2, 5, 10, 20, 30},
			Get: func(pp *policy.PressureParams) float64 { return float64(pp.Projector.Hysteresis) },
			Set: func(pp *policy.PressureParams, v float64) { pp.Projector.Hysteresis = int(v) }},
		{Name: "norm.queue_full", Values: []float64{0.1, 0.25, 0.5, 1},
			Get: func(pp *policy.PressureParams) float64 { return pp.Norm.QueueFull },
			Set: func(pp *policy.PressureParams, v float64) { pp.Norm.QueueFull = v }},
		{Name: "norm.busy_knee", Values: []float64{0.1, 0.2, 0.3, 0.4, 0.6, 0.8, 1},
			Get: func(pp *policy.PressureParams) float64 { return pp.Norm.BusyKnee },
			Set: func(pp *policy.PressureParams, v float64) { pp.Norm.BusyKnee = v }},
		{Name: "norm.ttft_full_s", Values: []float64{2, 5, 10},
			Get: func(pp *policy.PressureParams) float64 { return pp.Norm.TTFTFull.Seconds() },
			Set: func(pp *policy.PressureParams, v float64) { pp.Norm.TTFTFull = time.Duration(v * float64(time.Second)) }},
		{Name: "sticky.move_score", Values: []float64{0.5, 0.7, 0.9, 1},
			Get: func(pp *policy.PressureParams) float64 { return pp.Sticky.MoveScore },
			Set: func(pp *policy.PressureParams, v float64) { pp.Sticky.MoveScore = v }},
		{Name: "sticky.reprefill_tps", Values: []float64{0, 5000, 20000},
			Get: func(pp *policy.PressureParams) float64 { return pp.Sticky.RePrefillTPS },
			Set: func(pp *policy.PressureParams, v float64) { pp.Sticky.RePrefillTPS = v }},
	}
}

// TuneStep is one evaluation of the search.
type TuneStep struct {
	Round     int     `json:"round"`
	Param     string  `json:"param"`
	Value     float64 `json:"value"`
	Objective float64 `json:"objective"`
	Kept      bool    `json:"kept"`
}

// CoordinateSearch minimises eval over the space from start: in each round
// it visits every coordinate in order, tries each of its values with the
// others held, and keeps the best (a tie keeps the current value, so the
// search never moves without a gain). It stops after rounds rounds or a
// round that changed nothing. eval must be deterministic; the search is.
func CoordinateSearch(start policy.PressureParams, space []TuneParam, rounds int, eval func(policy.PressureParams) (float64, error)) (policy.PressureParams, []TuneStep, error) {
	cur := start
	best, err := eval(cur)
	if err != nil {
		return cur, nil, err
	}
	steps := []TuneStep{{Param: "start", Objective: best, Kept: true}}
	for round := 1; round <= rounds; round++ {
		changed := false
		for _, tp := range space {
			here := tp.Get(&cur)
			for _, v := range tp.Values {
				if v == here {
					continue
				}
				cand := cur
				tp.Set(&cand, v)
				if cand.Validate() != nil {
					continue
				}
				obj, err := eval(cand)
				if err != nil {
					return cur, steps, err
				}
				st := TuneStep{Round: round, Param: tp.Name, Value: v, Objective: obj}
				if obj < best {
					best, cur, here, changed, st.Kept = obj, cand, v, true, true
				}
				steps = append(steps, st)
			}
		}
		if !changed {
			break
		}
	}
	return cur, steps, nil
}

// TunePhases are the resilience phases the tuning objective covers (the
// study's variants, failover-ttl500 and telemetry-loss-each, are left to the
// evaluation).
var TunePhases = []string{"baseline", "capability", "failover", "wan-jitter", "telemetry-loss", "burst", "thermal"}

// TuneOptions set up TunePressure.
type TuneOptions struct {
	// Train are the seeds the search runs on; Test the held-out seeds the
	// result is evaluated on (the resilience study's seeds 1-5 by default,
	// so the study itself is held out).
	Train, Test []uint64
	Rounds      int // 0: 2
	Start       policy.PressureParams
	Parallel    int
	// Log, if set, gets a line per evaluation.
	Log func(string)
}

// PhaseCompare is pressure's and pulsar-waw's mean TTFT p95 in one phase.
type PhaseCompare struct {
	Phase    string  `json:"phase"`
	Pressure float64 `json:"pressure_p95_s"`
	Pulsar   float64 `json:"pulsar_waw_p95_s"`
}

// TuneEval is one parameter set evaluated on a set of seeds.
type TuneEval struct {
	Objective float64        `json:"objective"`
	Phases    []PhaseCompare `json:"phases"`
	// BurstReactS is the burst phase's routing reaction p95, mean over seeds.
	BurstReactS float64 `json:"burst_react_s"`
}

// TuneResult is the search's outcome.
type TuneResult struct {
	Start, Tuned     policy.PressureParams
	Steps            []TuneStep
	Train, Test      []uint64
	StartTrain       TuneEval
	TunedTrain       TuneEval
	StartTest        TuneEval
	TunedTest        TuneEval
	Space            []string
	RunsPerEvaluaton int
}

// burstTarget is the routing reaction the objective asks for.
const burstTarget = 250 * time.Millisecond

// burstWeight is what a second of burst reaction beyond burstTarget costs
// in the objective, against seconds of TTFT p95: small, so that the search
// never buys a fast reaction with weights that move on noise (a policy
// whose weights never move "reacts" only at the end of the span, 30 s).
const burstWeight = 0.01

// tuneObjective scores pressure against pulsar-waw, lower is better: per
// phase, the difference of mean TTFT p95 (seconds), counted three times
// where pressure is slower (being slower anywhere costs more than being
// faster elsewhere gains), plus burstWeight per second of burst reaction
// p95 beyond 250 ms.
func tuneObjective(phases []PhaseCompare, burstReact float64) float64 {
	var obj float64
	for _, pc := range phases {
		d := pc.Pressure - pc.Pulsar
		obj += d + 2*max(d, 0)
	}
	return obj + burstWeight*max(burstReact-burstTarget.Seconds(), 0)
}

// phaseP95 runs policy pol (with pressure parameters pp, if not nil) on the
// phases and seeds and returns, per phase, the mean TTFT p95 over the
// seeds, and the burst phase's mean reaction.
func phaseP95(ctx context.Context, pol string, pp *policy.PressureParams, phases []Phase, seeds []uint64, parallel int) (map[string]float64, float64, error) {
	var specs []PhaseSpec
	var rs []RunSpec
	for _, ph := range phases {
		for _, seed := range seeds {
			sp := PhaseSpec{Phase: ph, Policy: pol, Seed: seed, RPS: ResilienceRPS, Onset: 180 * time.Second, Pre: 30 * time.Second, Post: 60 * time.Second}
			r := resilienceRunSpec(sp)
			r.Fleet.Policy.Pressure = pp // as a fleet file's pressure section sets it
			specs, rs = append(specs, sp), append(rs, r)
		}
	}
	res, err := RunAll(ctx, rs, ResilienceRegistry(), parallel, nil)
	if err != nil {
		return nil, 0, err
	}
	sum := map[string]float64{}
	var react float64
	nReact := 0
	for i, rr := range res {
		m := Measure(PhaseRun{Spec: specs[i], SLO: rs[i].Fleet.Client.TTFTSLO, Records: rr.Records, Dispatches: rr.Dispatches,
			Marks: rr.Marks, MaxOutput: rs[i].Fleet.Workload.OutputTokensMax})
		sum[m.Phase] += m.P95S / float64(len(seeds))
		if m.Phase == "burst" {
			// No weight change at all counts as no reaction within the span.
			if m.DetectS < 0 {
				m.DetectS = specs[i].Post.Seconds()
			}
			react += m.DetectS
			nReact++
		}
	}
	if nReact > 0 {
		react /= float64(nReact)
	}
	return sum, react, nil
}

// TunePressure searches the pressure policy's scoring (PressureTuneSpace,
// CoordinateSearch) on the training seeds against pulsar-waw on the same
// seeds and runs (tuneObjective over TunePhases), then evaluates the start
// and the result on the held-out seeds.
func TunePressure(ctx context.Context, opts TuneOptions) (*TuneResult, error) {
	if len(opts.Train) == 0 || len(opts.Test) == 0 {
		return nil, fmt.Errorf("%w: tuning needs training and held-out seeds", ErrBadOptions)
	}
	for _, s := range opts.Train {
		if slices.Contains(opts.Test, s) {
			return nil, fmt.Errorf("%w: seed %d is both a training and a held-out seed", ErrBadOptions, s)
		}
	}
	if err := opts.Start.Validate(); err != nil {
		return nil, fmt.Errorf("%w: start: %w", ErrBadOptions, err)
	}
	rounds := opts.Rounds
	if rounds == 0 {
		rounds = 2
	}
	var phases []Phase
	for _, ph := range ResiliencePhases() {
		if slices.Contains(TunePhases, ph.Name) {
			phases = append(phases, ph)
		}
	}
	reference := map[string]map[string]float64{}
	evalOn := func(pp policy.PressureParams, seeds []uint64, key string) (TuneEval, error) {
		ref, ok := reference[key]
		if !ok {
			var err error
			if ref, _, err = phaseP95(ctx, "pulsar-waw", nil, phases, seeds, opts.Parallel); err != nil {
				return TuneEval{}, err
			}
			reference[key] = ref
		}
		got, react, err := phaseP95(ctx, "pressure", &pp, phases, seeds, opts.Parallel)
		if err != nil {
			return TuneEval{}, err
		}
		ev := TuneEval{BurstReactS: react}
		for _, ph := range phases {
			ev.Phases = append(ev.Phases, PhaseCompare{Phase: ph.Name, Pressure: got[ph.Name], Pulsar: ref[ph.Name]})
		}
		ev.Objective = tuneObjective(ev.Phases, react)
		return ev, nil
	}
	n := 0
	train := func(pp policy.PressureParams) (float64, error) {
		ev, err := evalOn(pp, opts.Train, "train")
		n++
		if err == nil && opts.Log != nil {
			opts.Log(fmt.Sprintf("eval %d: objective %.4f burst %.3fs %s", n, ev.Objective, ev.BurstReactS, describePressure(pp)))
		}
		return ev.Objective, err
	}
	tuned, steps, err := CoordinateSearch(opts.Start, PressureTuneSpace(), rounds, train)
	if err != nil {
		return nil, err
	}
	res := &TuneResult{Start: opts.Start, Tuned: tuned, Steps: steps, Train: opts.Train, Test: opts.Test,
		RunsPerEvaluaton: len(phases) * len(opts.Train)}
	for _, tp := range PressureTuneSpace() {
		res.Space = append(res.Space, fmt.Sprintf("%s %v", tp.Name, tp.Values))
	}
	for _, e := range []struct {
		pp    policy.PressureParams
		seeds []uint64
		key   string
		out   *TuneEval
	}{{opts.Start, opts.Train, "train", &res.StartTrain}, {tuned, opts.Train, "train", &res.TunedTrain},
		{opts.Start, opts.Test, "test", &res.StartTest}, {tuned, opts.Test, "test", &res.TunedTest}} {
		if *e.out, err = evalOn(e.pp, e.seeds, e.key); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// describePressure lists the tuned coordinates' values.
func describePressure(pp policy.PressureParams) string {
	var b strings.Builder
	for i, tp := range PressureTuneSpace() {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%g", tp.Name, tp.Get(&pp))
	}
	return b.String()
}

// PressureYAML is pp as a fleet file's pressure section.
func PressureYAML(pp policy.PressureParams) string {
	var b strings.Builder
	b.WriteString("pressure:\n  weights:\n")
	for s := range telemetry.NumSignals {
		fmt.Fprintf(&b, "    %s: %s\n", s, trimFloat(pp.Weights[s]))
	}
	n := pp.Norm
	fmt.Fprintf(&b, "  norm:\n    ttft_full: %v\n    error_full: %s\n    rtt_full: %v\n    jitter_full: %v\n    temp_ok: %s\n    temp_max: %s\n    clock_drop_full: %s\n    queue_full: %s\n    overload_full: %s\n    busy_knee: %s\n",
		n.TTFTFull, trimFloat(n.ErrorFull), n.RTTFull, n.JitterFull, trimFloat(n.TempOK), trimFloat(n.TempMax), trimFloat(n.ClockDropFull), trimFloat(n.QueueFull), trimFloat(n.OverloadFull), trimFloat(n.BusyKnee))
	fmt.Fprintf(&b, "  projection:\n    max: %d\n    min: %d\n    hysteresis: %d\n", pp.Projector.Max, pp.Projector.Min, pp.Projector.Hysteresis)
	st := pp.Sticky
	fmt.Fprintf(&b, "  sticky:\n    sessions: %d\n    ttl: %v\n    move_score: %s\n    reprefill_tps: %s\n", st.Sessions, st.TTL, trimFloat(st.MoveScore), trimFloat(st.RePrefillTPS))
	bu := pp.Burst
	fmt.Fprintf(&b, "  burst:\n    window: %v\n    baseline: %v\n    false_alarms: %s\n    hold: %v\n    hysteresis: %d\n", bu.Window, bu.Baseline, trimFloat(bu.FalseAlarms), bu.Hold, bu.Hysteresis)
	return b.String()
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%g", v)
}

// TuneMarkdown reports a search: the evaluations it kept, and pressure's
// TTFT p95 against pulsar-waw's per phase, before and after, on the
// training and the held-out seeds.
func TuneMarkdown(res *TuneResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Training seeds %v, held-out seeds %v, %d runs per evaluation, %d evaluations.\n\n", res.Train, res.Test, res.RunsPerEvaluaton, len(res.Steps))
	b.WriteString("| round | coordinate | value | training objective |\n|---|---|---|---|\n")
	for _, st := range res.Steps {
		if st.Kept {
			fmt.Fprintf(&b, "| %d | %s | %g | %.4f |\n", st.Round, st.Param, st.Value, st.Objective)
		}
	}
	fmt.Fprintf(&b, "\nstart: %s\ntuned: %s\n\n", describePressure(res.Start), describePressure(res.Tuned))
	b.WriteString("| seeds | phase | pulsar-waw p95 s | pressure (start) p95 s | pressure (tuned) p95 s |\n|---|---|---|---|---|\n")
	for _, set := range []struct {
		name        string
		start, tune TuneEval
	}{{"training", res.StartTrain, res.TunedTrain}, {"held-out", res.StartTest, res.TunedTest}} {
		for i, pc := range set.tune.Phases {
			fmt.Fprintf(&b, "| %s | %s | %.3f | %.3f | %.3f |\n", set.name, pc.Phase, pc.Pulsar, set.start.Phases[i].Pressure, pc.Pressure)
		}
		fmt.Fprintf(&b, "| %s | burst reaction p95 (mean) | - | %.3f | %.3f |\n", set.name, set.start.BurstReactS, set.tune.BurstReactS)
		fmt.Fprintf(&b, "| %s | objective | - | %.4f | %.4f |\n", set.name, set.start.Objective, set.tune.Objective)
	}
	return b.String()
}

// WeightChangeRate is how often, per second, any router's policy weights
// changed in [from, to) ("weights" marks): the background against which a
// burst reaction is read. A policy whose weights change ten times a second
// "reacts" to anything within 100 ms, a burst or not.
func WeightChangeRate(marks []sim.Mark, from, to time.Duration) float64 {
	if to <= from {
		return 0
	}
	n := 0
	for _, mk := range marks {
		if mk.What == "weights" && mk.At >= from && mk.At < to {
			n++
		}
	}
	return float64(n) / (to - from).Seconds()
}

// BurstFigures are the burst phase's routing figures for one run.
type BurstFigures struct {
	Seed uint64 `json:"seed"`
	// ReactS is the routing reaction p95 (burstReaction).
	ReactS float64 `json:"react_s"`
	// QuietRate is the weight changes per second in the 30 s before the
	// first burst; BurstRate in the 2 s after each burst.
	QuietRate float64 `json:"quiet_changes_per_s"`
	BurstRate float64 `json:"burst_changes_per_s"`
}

// BurstPhaseFigures runs the burst phase for pol (with pressure parameters
// pp if not nil) on the seeds and returns each run's BurstFigures. size, if
// > 0, replaces the phase's 50 sessions per burst.
func BurstPhaseFigures(ctx context.Context, pol string, pp *policy.PressureParams, seeds []uint64, size int) ([]BurstFigures, error) {
	var ph Phase
	for _, p := range ResiliencePhases() {
		if p.Name == "burst" {
			ph = p
		}
	}
	if size > 0 {
		ph.Faults = func(at time.Duration) []sim.Fault {
			return []sim.Fault{{Kind: sim.FaultBurst, At: at, Every: 30 * time.Second, Count: size}}
		}
	}
	var specs []PhaseSpec
	var rs []RunSpec
	for _, seed := range seeds {
		sp := PhaseSpec{Phase: ph, Policy: pol, Seed: seed, RPS: ResilienceRPS, Onset: 180 * time.Second, Pre: 30 * time.Second, Post: 60 * time.Second}
		r := resilienceRunSpec(sp)
		r.Fleet.Policy.Pressure = pp
		specs, rs = append(specs, sp), append(rs, r)
	}
	res, err := RunAll(ctx, rs, ResilienceRegistry(), 0, nil)
	if err != nil {
		return nil, err
	}
	out := make([]BurstFigures, len(res))
	for i, rr := range res {
		sp := specs[i]
		m := Measure(PhaseRun{Spec: sp, Marks: rr.Marks, Records: rr.Records, Dispatches: rr.Dispatches})
		f := BurstFigures{Seed: sp.Seed, ReactS: m.DetectS, QuietRate: WeightChangeRate(rr.Marks, sp.Onset-sp.Pre, sp.Onset)}
		var after float64
		bursts := 0
		for _, mk := range rr.Marks {
			if mk.What == "fault:burst" && mk.At >= sp.Onset && mk.At < sp.Onset+sp.Post {
				after += WeightChangeRate(rr.Marks, mk.At, mk.At+2*time.Second)
				bursts++
			}
		}
		if bursts > 0 {
			f.BurstRate = after / float64(bursts)
		}
		out[i] = f
	}
	return out, nil
}
