package policy

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// PressureParams are the pressure policy's scoring parameters.
type PressureParams struct {
	Weights   telemetry.Weights
	Norm      telemetry.Norm
	Projector telemetry.Projector
}

// DefaultPressureParams are the pressure policy's defaults, found by the
// tuning search of docs/pressure.md (study.TunePressure: a coordinate search
// on the resilience study's phases, training seeds 11-15, checked on the
// held-out seeds 1-5) from telemetry's first, hand-set values
// (UntunedPressureParams):
//
//	weights  queue 1, kv 0.25, gpu/mem/sm/dram 0.05 each, errors 1, rtt 0.25; ttft, jitter and thermal 0
//	norm     telemetry.DefaultNorm (queue full at a backlog of half the slots, busy share off)
//	levels   1-100 with a hysteresis of 10
//
// A fleet file's pressure section, or a router's --pressure file, replaces
// any part of them.
func DefaultPressureParams() PressureParams {
	pp := UntunedPressureParams()
	w := &pp.Weights
	w[telemetry.SigQueue], w[telemetry.SigKV], w[telemetry.SigErrors], w[telemetry.SigRTT] = 1, 0.25, 1, 0.25
	w[telemetry.SigTTFT], w[telemetry.SigJitter], w[telemetry.SigThermal] = 0, 0, 0
	return pp
}

// UntunedPressureParams are telemetry's documented first values, fixed
// before any measurement: telemetry.DefaultWeights, telemetry.DefaultNorm
// and levels 1-100 with a hysteresis of 10. They are the tuning search's
// start.
func UntunedPressureParams() PressureParams {
	return PressureParams{Weights: telemetry.DefaultWeights(), Norm: telemetry.DefaultNorm(), Projector: telemetry.DefaultProjector()}
}

// Validate reports what is wrong with the parameters.
func (pp PressureParams) Validate() error {
	for _, err := range []error{pp.Weights.Validate(), pp.Norm.Validate(), pp.Projector.Validate()} {
		if err != nil {
			return fmt.Errorf("pressure params: %w", err)
		}
	}
	return nil
}

// Pressure is telemetry-aware placement by one weight per backend. For each
// backend it normalises the signals the router holds to pressures in [0,1]
// (telemetry.Normalise), sums them with the configured weights
// (telemetry.Score) and projects the score to a level from Projector.Max (no
// pressure) down to Projector.Min (full pressure) with hysteresis
// (telemetry.Projector). The backend's weight is its capacity times that
// level (PlacementWeight): the one number the router places by, reports on
// its backends endpoint and exports to Envoy over xDS.
//
// Requests are placed by weighted rendezvous hashing over those weights, as
// pulsar-waw places them over capacities (a session's backend is the one
// ranking it first, which keeps its prefix cache; a widening band, a
// bounded wait, overflow only to a free slot). With no pressure at all the
// weights are the capacities times Projector.Max, so a quiet fleet is placed
// exactly as pulsar-waw places it.
//
// The load part of the score is built for speed and stability. The queue
// pressure comes from what the router counts itself at the instant of the
// pick: its own dispatches beyond a backend's free slots, the requests
// waiting at the backend and at this router (the backlog), and the share of
// its recent answers from the backend that were overload refusals (503/429,
// View.Overload). A burst therefore moves the weights at the pick that
// creates the backlog, not when the gateways next report; the reported
// signals (TTFT, KV fill, hardware, errors, heat, path) stay for what only
// they can tell. Since the backlog is zero while a backend has free slots,
// the router's own counts do not move sessions in the normal course of
// things; the projector's hysteresis keeps small moves of the reported
// signals from moving them either, and the tuned defaults give the fast-
// moving reported signals (TTFT, jitter, heat) no weight at all, since each
// move of a weight moves sessions off their prefix cache (docs/pressure.md).
//
// A backend whose error pressure is full (its error rate, as the router
// counts it or as its report says, at Norm.ErrorFull or more) is at the
// minimum level whatever the weights: the errors weight tunes how much a
// few failures count, never whether a failing backend keeps its traffic.
//
// It asks the router to hide backends too small for a request
// (CapabilityAware). It reads no clock: weights are recomputed from the views
// at every pick, so how often picks come does not change them.
//
// Weights reports each backend's weight, level, score, pressures and whether
// its score ran without the hardware source (fallback).
type Pressure struct {
	p      Params
	pp     PressureParams
	scorer *telemetry.Scorer
	state  []BackendWeight
	scores []float64
}

var (
	_ Policy          = (*Pressure)(nil)
	_ CapabilityAware = (*Pressure)(nil)
	_ WeightReporter  = (*Pressure)(nil)
	_ WeightKeeper    = (*Pressure)(nil)
	_ Membership      = (*Pressure)(nil)
)

// SetBackends implements Membership: each backend that stays keeps its
// weights (and so the projector's hysteresis); one that joined starts at
// zero, as in a new policy.
func (pr *Pressure) SetBackends(backends []Backend, from []int) {
	state := make([]BackendWeight, len(backends))
	for i, f := range from {
		if i < len(state) && f >= 0 && f < len(pr.state) {
			state[i] = pr.state[f]
		}
	}
	pr.state = state
}

// NewPressure returns the policy.
func NewPressure(p Params, pp PressureParams, _ []Backend) (*Pressure, error) {
	if err := pp.Validate(); err != nil {
		return nil, err
	}
	return &Pressure{p: p, pp: pp, scorer: telemetry.NewScorer(pp.Weights, pp.Norm)}, nil
}

// Name implements Policy.
func (*Pressure) Name() string { return "pressure" }

// CapabilityAware implements CapabilityAware.
func (*Pressure) CapabilityAware() bool { return true }

// BackendWeight is one backend's standing under a weighting policy.
type BackendWeight struct {
	// Weight is the weight the policy places by (pressure: the capacity
	// times Rank; 0 before the first refresh).
	Weight int `json:"weight"`
	// Rank is pressure's level: the score projected to Projector.Min..Max
	// with hysteresis (0 before the first refresh).
	Rank int `json:"rank"`
	// Score is the pressure score in [0,1].
	Score float64 `json:"score"`
	// Fallback is true when the score ran without hardware signals.
	Fallback bool `json:"fallback"`
	// Pressures are the normalised signals, in telemetry.Signal order.
	Pressures telemetry.Pressures `json:"pressures"`
}

// WeightReporter is implemented by policies that keep per-backend weights;
// a live router reads it for its backends endpoint, its metrics and xDS.
type WeightReporter interface {
	// Weights brings the weights up to date with views and appends them,
	// one per view, to out.
	Weights(views []View, out []BackendWeight) []BackendWeight
}

// Weights implements WeightReporter.
func (pr *Pressure) Weights(views []View, out []BackendWeight) []BackendWeight {
	pr.refresh(views)
	return append(out, pr.state...)
}

// LastWeights implements WeightKeeper.
func (pr *Pressure) LastWeights(out []BackendWeight) []BackendWeight {
	return append(out, pr.state...)
}

// PlacementWeight is a backend's placement weight under pressure: its
// capacity times its projected level. Pick ranks sessions by it, Weights
// reports it, and the live router exports it to Envoy.
func PlacementWeight(capacity, level int) int { return max(capacity, 1) * level }

// Backlog is what a router counts of backend v's load beyond its engine
// slots at the instant of a pick: the requests waiting at the backend (its
// last report) and at this router, or, if more, everything outstanding and
// queued here less the capacity (this router's own dispatches past the free
// slots, which the backend's next report will show as waiting).
func Backlog(v *View) int {
	return max(v.Waiting+v.Queued, v.Outstanding()+v.Queued-v.Capacity)
}

// refresh recomputes every backend's score, level and weight:
// telemetry.Normalise, then telemetry.Score, through a telemetry.Scorer
// (the same results, without copying the parameters and pressures for
// every backend).
func (pr *Pressure) refresh(views []View) {
	if n := len(pr.state); n < len(views) {
		// One allocation for a new fleet size; new backends start at zero.
		pr.state = slices.Grow(pr.state, len(views)-n)[:len(views)]
		clear(pr.state[n:])
	}
	pr.state = pr.state[:len(views)]
	errorFull, proj := pr.pp.Norm.ErrorFull, &pr.pp.Projector
	var avail [telemetry.NumSignals]bool
	for i := range views {
		v, st := &views[i], &pr.state[i]
		p := &st.Pressures
		pr.scorer.Normalise(p, &avail, v.Signals, telemetry.Load{Capacity: v.Capacity, Waiting: Backlog(v), Overload: v.Overload,
			Busy: float64(v.Outstanding()+v.Queued) / float64(max(v.Capacity, 1))}, &v.Path)
		// The router's own count of failures is fresher than the report's.
		if e := v.ErrorRate / errorFull; e > p[telemetry.SigErrors] || !avail[telemetry.SigErrors] {
			p[telemetry.SigErrors] = min(max(e, p[telemetry.SigErrors]), 1)
			avail[telemetry.SigErrors] = true
		}
		score, _, fallback := pr.scorer.Score(p, &avail)
		if p[telemetry.SigErrors] >= 1 {
			score = 1 // failing at Norm.ErrorFull or more: the minimum, whatever the weights
		}
		st.Rank = proj.Project(st.Rank, score)
		st.Weight = PlacementWeight(v.Capacity, st.Rank)
		st.Score, st.Fallback = score, fallback
	}
}

// Pick implements Policy: weighted rendezvous over the placement weights
// (PlacementWeight), then pulsar-waw's band.
func (pr *Pressure) Pick(now time.Duration, r *Request, views []View) Decision {
	pr.refresh(views)
	strict := anyEligible(r, views)
	pr.scores = grow(pr.scores, len(views))
	for i := range views {
		v := &views[i]
		if !eligible(r, v, strict) {
			pr.scores[i] = math.Inf(-1)
			continue
		}
		pr.scores[i] = -float64(pr.state[i].Weight) / math.Log(unit(mix(r.Session^v.Key)))
	}
	return bandPick(pr.p, now, r, views, pr.scores)
}
