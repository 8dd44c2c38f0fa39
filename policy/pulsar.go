package policy

import (
	"math"
	"time"
)

// PulsarWaW is weighted rendezvous affinity with a widening band, a bounded
// wait and overflow only to free backends (see the package documentation).
type PulsarWaW struct {
	p      Params
	name   string
	scores []float64 // scratch, one per view; reused across picks
	bounds []float64 // scratch: each view's upper bound on its score
	top    []float64 // scratch: Watch's highest scores
	// Above rankFlatMax backends the ranking is a rankTree: tree, kept
	// current by the router (Tracker), or scratch, built for one pick of
	// views it was not told of.
	tree, scratch *rankTree
	rankSwitch
}

var _ Policy = (*PulsarWaW)(nil)

// NewPulsarWaW returns the policy; it keeps no per-backend state of its own,
// so backends may come and go between picks, except that once tracked
// (Tracker) it must be told of them by Track, as the contract says.
func NewPulsarWaW(p Params, _ []Backend) *PulsarWaW { return &PulsarWaW{p: p, name: "pulsar-waw"} }

// Name implements Policy.
func (pw *PulsarWaW) Name() string { return pw.name }

// useMeasured reports whether every eligible backend has a measured weight.
func (pw *PulsarWaW) useMeasured(views []View) bool {
	if pw.p.Weight == WeightCapacity {
		return false
	}
	for i := range views {
		if views[i].Eligible && views[i].MaxInputTPS <= 0 {
			return false
		}
	}
	return true
}

// Weights implements WeightReporter: the weight each eligible backend's
// rendezvous scores use (its capacity, or its measured input TPS), 0 for the
// others.
func (pw *PulsarWaW) Weights(views []View, out []BackendWeight) []BackendWeight {
	measured := pw.useMeasured(views)
	for i := range views {
		var w BackendWeight
		if views[i].Eligible {
			w.Weight = views[i].Capacity
			if measured {
				w.Weight = int(math.Round(views[i].MaxInputTPS))
			}
		}
		out = append(out, w)
	}
	return out
}

var _ WeightReporter = (*PulsarWaW)(nil)

// Score is backend v's weighted rendezvous score for a session: higher ranks
// first. With weights w_b, the share of sessions ranking b first is
// w_b / sum(w).
func Score(session uint64, v *View, measured bool) float64 {
	w := float64(v.Capacity)
	if measured {
		w = v.MaxInputTPS
	}
	return -w / math.Log(unit(mix(session^v.Key)))
}

// boundSlack widens the cheap bound on a rendezvous score (see Pick) far
// beyond the rounding error of either expression, so that a backend whose
// bound does not beat a score can never beat it exactly.
const boundSlack = 1 + 1e-9

// Pick implements Policy. Above rankFlatMax backends it ranks by the rank
// tree (pickTree). Otherwise it ranks every eligible backend by Score, but
// computes the logarithm only for the few that can matter: since -ln(u) >=
// 1-u, w/(1-u) bounds a backend's score from above, and a backend whose
// bound does not beat the best score so far (the best free one's, for a free
// backend) cannot be the top or the best free backend. Its exact score is
// computed later only if the band's rank count needs it. The decisions are
// those of scoring every backend exactly (TestPulsarPruningExact).
func (pw *PulsarWaW) Pick(now time.Duration, r *Request, views []View) Decision {
	if t := pw.treeFor(views); t != nil {
		return pw.pickTree(t, now, r, views)
	}
	strict := anyEligible(r, views)
	measured := pw.useMeasured(views)
	pw.scores = resize(pw.scores, len(views))
	pw.bounds = resize(pw.bounds, len(views))
	top, free := -1, -1
	topScore, freeScore := math.Inf(-1), math.Inf(-1)
	for i := range views {
		v := &views[i]
		if !eligible(r, v, strict) {
			pw.scores[i], pw.bounds[i] = math.Inf(-1), math.Inf(-1)
			continue
		}
		w, u := weightOf(v, measured), unit(mix(r.Session^v.Key))
		bound := w / (1 - u) * boundSlack
		pw.bounds[i], pw.scores[i] = bound, math.NaN()
		isFree := v.Free()
		if bound <= topScore && (!isFree || bound <= freeScore) {
			continue
		}
		sc := -w / math.Log(u)
		pw.scores[i] = sc
		if sc > topScore {
			top, topScore = i, sc
		}
		if isFree && sc > freeScore {
			free, freeScore = i, sc
		}
	}
	return bandDecide(pw.p, now, r, views, top, free, func(limit int) int {
		rank := 0
		for i, b := range pw.bounds {
			if rank >= limit {
				break
			}
			if b <= freeScore { // also skips the ineligible (-Inf)
				continue
			}
			sc := pw.scores[i]
			if math.IsNaN(sc) {
				sc = -weightOf(&views[i], measured) / math.Log(unit(mix(r.Session^views[i].Key)))
			}
			if sc > freeScore {
				rank++
			}
		}
		return rank
	})
}

// Track implements Tracker: above rankFlatMax backends, the rank tree.
func (pw *PulsarWaW) Track(views []View) {
	if !pw.ranksByTree(len(views)) {
		pw.tree = nil
		return
	}
	if pw.tree == nil {
		pw.tree = &rankTree{}
	}
	pw.tree.build(views, pw.p.Weight != WeightCapacity)
}

// Prefetch implements Tracker.
func (pw *PulsarWaW) Prefetch(i int) uint64 { return pw.tree.prefetch(i) }

// Touched implements Tracker.
func (pw *PulsarWaW) Touched(views []View, i int) {
	if pw.tree != nil && pw.tree.n == len(views) {
		pw.tree.touched(views, i)
	}
}

var _ Tracker = (*PulsarWaW)(nil)

// rankSwitch chooses between ranking flat and by the rank tree: by the
// tree above rankFlatMax backends, unless flat (every fleet flat) or
// treeFrom is set (fleets of treeFrom backends or more by the tree; tests
// and benchmarks compare the two at any size).
type rankSwitch struct {
	flat     bool
	treeFrom int
}

// ranksByTree reports whether n backends are ranked by the rank tree.
func (s rankSwitch) ranksByTree(n int) bool {
	if s.treeFrom > 0 {
		return n >= s.treeFrom
	}
	return !s.flat && n > rankFlatMax
}

// treeFor is the rank tree for a pick over views, nil to rank them flat:
// the tracked one, or one built now for views the policy was not told of
// (the ranking is the same; the pick then costs O(n)).
func (pw *PulsarWaW) treeFor(views []View) *rankTree {
	if !pw.ranksByTree(len(views)) {
		return nil
	}
	if pw.tree != nil && pw.tree.n == len(views) {
		return pw.tree
	}
	if pw.scratch == nil {
		pw.scratch = &rankTree{}
	}
	pw.scratch.build(views, pw.p.Weight != WeightCapacity)
	return pw.scratch
}

// pickTree is Pick over a rank tree: the same band rule over the tree's
// ranking, at a cost that does not grow with the fleet.
func (pw *PulsarWaW) pickTree(t *rankTree, now time.Duration, r *Request, views []View) Decision {
	t.exclusions(r)
	return treeBand(pw.p, t, now, r, views)
}

// treeBand is pulsar-waw's band over t's ranking for r (t's exclusions
// set for r): the top backend if it is free, else bandDecide between it
// and the best free one.
func treeBand(p Params, t *rankTree, now time.Duration, r *Request, views []View) Decision {
	top, _ := t.top(r.Session)
	if top >= 0 && views[top].Free() {
		return dispatch(top)
	}
	free, tf := t.bestFree(r.Session)
	return bandDecide(p, now, r, views, top, free, func(limit int) int {
		return t.countBefore(r.Session, tf, limit)
	})
}

// weightOf is backend v's rendezvous weight.
func weightOf(v *View, measured bool) float64 {
	if measured {
		return v.MaxInputTPS
	}
	return float64(v.Capacity)
}

// bandPick is the widening-band placement of pulsar-waw over given
// rendezvous scores (-Inf: not a candidate): the best-ranked backend in the
// band with a free slot, else wait at the top-ranked one, else overflow to
// the best free one anywhere, else reject.
func bandPick(p Params, now time.Duration, r *Request, views []View, scores []float64) Decision {
	top, free := -1, -1
	topScore, freeScore := math.Inf(-1), math.Inf(-1)
	for i, s := range scores {
		if math.IsInf(s, -1) {
			continue
		}
		if s > topScore {
			top, topScore = i, s
		}
		if views[i].Free() && s > freeScore {
			free, freeScore = i, s
		}
	}
	return bandDecide(p, now, r, views, top, free, func(limit int) int {
		rank := 0
		for _, s := range scores {
			if rank >= limit {
				break
			}
			if s > freeScore {
				rank++
			}
		}
		return rank
	})
}

// bandDecide is bandPick's decision once the top-ranked backend and the
// best-ranked free one are known (-1: none); rankOfFree counts the backends
// ranked above the free one, stopping at limit (only whether the count
// reaches the band matters), and is called only when the band matters.
func bandDecide(p Params, now time.Duration, r *Request, views []View, top, free int, rankOfFree func(limit int) int) Decision {
	waited := now - r.Arrived
	band := bandOf(p, now, r)
	if top < 0 {
		return reject("no eligible backend")
	}
	if free == top {
		return dispatch(free)
	}
	if free >= 0 && band > 1 && rankOfFree(band) < band {
		return dispatch(free)
	}
	if waited >= p.MaxWait {
		return reject("overloaded: no free slot within the band after " + p.MaxWait.String())
	}
	if r.QueuedAt == top || views[top].Queued < p.MaxQueued {
		until := min(r.Arrived+time.Duration(band)*p.BandStep, r.Arrived+p.MaxWait)
		return Decision{Kind: Wait, Backend: top, Until: until}
	}
	if free >= 0 {
		return dispatch(free)
	}
	return reject("overloaded: affinity queue full and no backend has a free slot")
}

// bandOf is the band's width for r at now: 1, and one more per BandStep
// waited since it arrived.
func bandOf(p Params, now time.Duration, r *Request) int {
	return 1 + int((now-r.Arrived)/p.BandStep)
}
