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
	// Sticky keeps sessions on the backend holding their prefix cache
	// while the weights move (StickyParams).
	Sticky StickyParams
	// Burst lets the levels follow the router's own counts at once while
	// more requests arrive than the recent rate explains (BurstParams).
	Burst BurstParams
}

// DefaultPressureParams are the pressure policy's defaults, found by the
// tuning search of docs/pressure.md (study.TunePressure: a coordinate search
// on the resilience study's phases, training seeds 11-30, one round, checked
// on the held-out seeds 1-5) from the hand-set values with sticky sessions
// (UntunedPressureParams):
//
//	weights  queue 0.25, ttft 0.5, gpu/mem/sm/dram 0.05 each, errors 1, thermal 0.4, rtt 0.25, jitter 0.5; kv 0
//	norm     telemetry.DefaultNorm with the busy share on above a knee of 0.2
//	levels   1-100 with a hysteresis of 10
//	sticky   65,536 sessions for 60 s; a session leaves only a backend that fails or cannot take it (move_score 1)
//	burst    the burst detector on (DefaultBurstParams; added after the search, for the burst reaction)
//
// A fleet file's pressure section, or a router's --pressure file, replaces
// any part of them.
func DefaultPressureParams() PressureParams {
	pp := UntunedPressureParams()
	w := &pp.Weights
	w[telemetry.SigQueue], w[telemetry.SigTTFT], w[telemetry.SigKV] = 0.25, 0.5, 0
	w[telemetry.SigThermal], w[telemetry.SigRTT], w[telemetry.SigJitter] = 0.4, 0.25, 0.5
	pp.Norm.BusyKnee = 0.2
	pp.Sticky.MoveScore = 1
	pp.Burst = DefaultBurstParams()
	return pp
}

// UntunedPressureParams are telemetry's documented first values, fixed
// before any measurement: telemetry.DefaultWeights, telemetry.DefaultNorm
// and levels 1-100 with a hysteresis of 10, with sticky sessions
// (DefaultStickyParams) and no burst detector. They are the tuning search's
// start.
func UntunedPressureParams() PressureParams {
	return PressureParams{Weights: telemetry.DefaultWeights(), Norm: telemetry.DefaultNorm(), Projector: telemetry.DefaultProjector(),
		Sticky: DefaultStickyParams()}
}

// Validate reports what is wrong with the parameters.
func (pp PressureParams) Validate() error {
	for _, err := range []error{pp.Weights.Validate(), pp.Norm.Validate(), pp.Projector.Validate(), pp.Sticky.Validate(), pp.Burst.Validate()} {
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
// New sessions are placed by weighted rendezvous hashing over those
// weights, as pulsar-waw places them over capacities (a widening band, a
// bounded wait, overflow only to a free slot). A session placed before
// (StickyParams) ranks the backend it was last dispatched to first, since
// that backend holds its prefix cache, until the backend fails, cannot take
// the request, scores above Sticky.MoveScore or, with Sticky.RePrefillTPS,
// reports a TTFT that a re-prefill elsewhere would beat: a weight move
// steers new work and leaves existing sessions where their cache is. With
// no pressure at all the weights are the capacities times Projector.Max, so
// a quiet fleet's new sessions go where pulsar-waw would place them.
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
// signals from changing the weights on noise. Before sessions were sticky,
// each move of a weight moved sessions off their prefix cache, and the
// tuning gave the fast-moving signals (TTFT, jitter, heat) no weight at all
// (docs/pressure.md).
//
// A backend whose error pressure is full (its error rate, as the router
// counts it or as its report says, at Norm.ErrorFull or more) is at the
// minimum level whatever the weights: the errors weight tunes how much a
// few failures count, never whether a failing backend keeps its traffic.
//
// The hysteresis that keeps noise from moving the weights would also hold
// back the router's own counts in a burst, which add only a few busy slots
// a backend at its first picks. So a burst detector (BurstParams) watches
// the requests arriving at this router; while more arrive than the recent
// rate explains, a level moves to more pressure by Burst.Hysteresis levels
// or more, at the pick, instead of after the next reports.
//
// It asks the router to hide backends too small for a request
// (CapabilityAware). It reads no clock: weights are recomputed from the views
// at every pick, with the pick's time for the burst detector, so how often
// picks come changes them only through the detector. Above rankFlatMax
// backends it ranks by a rank tree over the weights and recomputes only the
// weights that may have changed since the last pick, with the same result
// (pressTree).
//
// Weights reports each backend's weight, level, score, pressures and whether
// its score ran without the hardware source (fallback).
type Pressure struct {
	p      Params
	pp     PressureParams
	scorer *telemetry.Scorer
	state  []BackendWeight
	scores []float64
	sticky *stickyTable // nil: stickiness off
	burst  *burstDetector
	now    time.Duration // the latest pick's time, for Weights
	// Above rankFlatMax backends the ranking is a rank tree over the
	// placement weights (pressure_tree.go): tree, kept current by the
	// router (Tracker), or scratch, built for one pick of views it was not
	// told of.
	tree    *pressTree
	scratch *rankTree
	rankSwitch
	decay decay
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
	return &Pressure{p: p, pp: pp, scorer: telemetry.NewScorer(pp.Weights, pp.Norm), sticky: newStickyTable(pp.Sticky),
		burst: newBurstDetector(pp.Burst)}, nil
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

// Weights implements WeightReporter. The burst detector's state is the
// latest pick's.
func (pr *Pressure) Weights(views []View, out []BackendWeight) []BackendWeight {
	pr.decayAll(views)
	pr.refresh(views, pr.burst.on(pr.now))
	pr.refreshed(views)
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
// every backend). While burst is on, a level moves to more pressure by
// Burst.Hysteresis levels or more (BurstParams).
func (pr *Pressure) refresh(views []View, burst bool) {
	if n := len(pr.state); n < len(views) {
		// One allocation for a new fleet size; new backends start at zero.
		pr.state = slices.Grow(pr.state, len(views)-n)[:len(views)]
		clear(pr.state[n:])
	}
	pr.state = pr.state[:len(views)]
	for i := range views {
		pr.refreshOne(&views[i], &pr.state[i], burst)
	}
}

// refreshOne recomputes one backend's score, level and weight (refresh).
func (pr *Pressure) refreshOne(v *View, st *BackendWeight, burst bool) {
	errorFull, proj := pr.pp.Norm.ErrorFull, &pr.pp.Projector
	var avail [telemetry.NumSignals]bool
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
	if t := proj.Target(score); burst && st.Rank > 0 && st.Rank-t >= pr.pp.Burst.Hysteresis {
		st.Rank = t
	} else {
		st.Rank = proj.Project(st.Rank, score)
	}
	st.Weight = PlacementWeight(v.Capacity, st.Rank)
	st.Score, st.Fallback = score, fallback
}

// Pick implements Policy: a session with a home (StickyParams) ranks its
// home first while it may stay there; otherwise, and below the home,
// weighted rendezvous over the placement weights (PlacementWeight). Then
// pulsar-waw's band. A dispatch makes its backend the session's home. A
// request's first pick at the router (Request.Arrival) counts as an arrival
// for the burst detector.
func (pr *Pressure) Pick(now time.Duration, r *Request, views []View) Decision {
	pr.now = max(pr.now, now)
	if pr.burst != nil && r.Arrival {
		pr.burst.arrive(now)
	}
	burst := pr.burst.on(pr.now)
	if pr.ranksByTree(len(views)) {
		return pr.pickTree(now, r, views, burst)
	}
	pr.refresh(views, burst)
	strict := anyEligible(r, views)
	pr.scores = resize(pr.scores, len(views))
	for i := range views {
		v := &views[i]
		if !eligible(r, v, strict) {
			pr.scores[i] = math.Inf(-1)
			continue
		}
		pr.scores[i] = -float64(pr.state[i].Weight) / math.Log(unit(mix(r.Session^v.Key)))
	}
	return pr.stickyBandPick(now, r, views)
}

// stickyBandPick picks by pr.scores (the session's ranking): the session's
// home first while it stays there, then pulsar-waw's band; a dispatch
// makes its backend the session's home.
func (pr *Pressure) stickyBandPick(now time.Duration, r *Request, views []View) Decision {
	if pr.sticky == nil {
		return bandPick(pr.p, now, r, views, pr.scores)
	}
	if home := pr.home(now, r, views); home >= 0 {
		pr.scores[home] = math.Inf(1)
	}
	d := bandPick(pr.p, now, r, views, pr.scores)
	if d.Kind == Dispatch {
		pr.sticky.put(now, r.Session, views[d.Backend].Key)
	}
	return d
}

// home is the backend r's session stays on, or -1 for the weights to place
// it: the backend it was last dispatched to within the TTL, unless that one
// is not a candidate (not eligible, or it refused this request), is at the
// minimum level, has a score of MoveScore or more, or costs more than a
// re-prefill elsewhere (stayCostly).
func (pr *Pressure) home(now time.Duration, r *Request, views []View) int {
	key, ok := pr.sticky.get(now, r.Session)
	if !ok {
		return -1
	}
	h := viewOf(views, key)
	if h < 0 || math.IsInf(pr.scores[h], -1) || !pr.staysOn(r, views, h, true, false) {
		return -1
	}
	return h
}

// viewOf is the first position of views with key, -1 if none.
func viewOf(views []View, key uint64) int {
	for i := range views {
		if views[i].Key == key {
			return i
		}
	}
	return -1
}

// staysOn reports whether r's session stays on its home h, a candidate
// for r: h is not failing (errors at Norm.ErrorFull), its score is not
// above MoveScore, and it costs no more than a re-prefill elsewhere
// (stayCostly). The cost comparison reads pr.scores, -Inf for every
// backend that is not a candidate; unless scored, staysOn marks them
// there first (strict as for eligible), only when the comparison runs.
func (pr *Pressure) staysOn(r *Request, views []View, h int, scored, strict bool) bool {
	st := &pr.state[h]
	if st.Pressures[telemetry.SigErrors] >= 1 || st.Score > pr.pp.Sticky.MoveScore {
		return false
	}
	if !scored && pr.pp.Sticky.RePrefillTPS > 0 && r.Tokens > 0 && views[h].Signals != nil {
		pr.scores = resize(pr.scores, len(views))
		for i := range views {
			pr.scores[i] = 0
			if !eligible(r, &views[i], strict) {
				pr.scores[i] = math.Inf(-1)
			}
		}
	}
	return !pr.stayCostly(r, views, h)
}

// stayCostly is the cost comparison of StickyParams.RePrefillTPS: whether
// the TTFT backend h reports (its p95, which carries its queue and any
// slowdown) exceeds the lowest another candidate reports by more than a
// re-prefill of the request's tokens elsewhere would take. Without
// reports, tokens or a rate it is false.
func (pr *Pressure) stayCostly(r *Request, views []View, h int) bool {
	tps := pr.pp.Sticky.RePrefillTPS
	if tps <= 0 || r.Tokens <= 0 || views[h].Signals == nil {
		return false
	}
	best := time.Duration(-1)
	for i := range views {
		if i == h || math.IsInf(pr.scores[i], -1) || views[i].Signals == nil {
			continue
		}
		if t := views[i].Signals.TTFTP95; best < 0 || t < best {
			best = t
		}
	}
	if best < 0 {
		return false
	}
	extra := (views[h].Signals.TTFTP95 - best).Seconds()
	return extra > float64(r.Tokens)/tps
}
