package policy

import (
	"math"
	"time"
)

// Watcher is implemented by policies whose decision to make a request wait
// stays the same, when the request is asked again before the decision's
// Until, for as long as
//
//   - no backend changes its Eligible, Capacity, MaxModelLen, Key or (when
//     Watch says so) MaxInputTPS, and no backend joins or leaves, and
//   - none of the backends Watch names gets a free slot (View.Free),
//
// whatever else changes (other backends' load, other requests' queues, the
// clock). A router asks such a waiting request again only when one of these
// happens, or at its Until, instead of on every stats message that shows a
// free slot somewhere: with many backends and many waiting requests, most
// of those picks would give the same answer. A policy whose Pick changes its
// own state, or that reads anything else of the views (error rates,
// signals, paths), must not implement it.
type Watcher interface {
	// Watch appends to out the backends whose free slot would change the
	// Wait decision d that Pick just gave r over views at now; tps reports
	// whether d also depends on the backends' MaxInputTPS. It is called
	// with the views Pick saw.
	Watch(now time.Duration, r *Request, views []View, d Decision, out []int) (watch []int, tps bool)
}

var (
	_ Watcher = (*WaW)(nil)
	_ Watcher = (*PulsarWaW)(nil)
)

// Watch implements Watcher: a request waits for its affine backend, which it
// takes once it has a free slot; the affine backend depends only on which
// backends are eligible, and the wait ends at Until.
func (w *WaW) Watch(_ time.Duration, _ *Request, _ []View, d Decision, out []int) ([]int, bool) {
	if d.Kind != Wait {
		return out, false
	}
	return append(out, d.Backend), false
}

// Watch implements Watcher: a request waits at its top-ranked backend while
// no backend within its band (the band backends ranked highest, ties
// included) has a free slot; the band widens only at Until. The ranking
// depends on the backends' eligibility and weights (capacity, or measured
// input TPS when every eligible backend has one), so tps is true unless the
// weight source is capacity.
func (pw *PulsarWaW) Watch(now time.Duration, r *Request, views []View, d Decision, out []int) ([]int, bool) {
	if d.Kind != Wait {
		return out, false
	}
	band := 1 + int((now-r.Arrived)/pw.p.BandStep)
	if t := pw.treeFor(views); t != nil {
		t.exclusions(r)
		return t.band(r.Session, band, out), pw.p.Weight != WeightCapacity
	}
	strict := anyEligible(r, views)
	measured := pw.useMeasured(views)
	// The band-th highest score, by a pruned pass like Pick's: a backend
	// whose bound does not beat the band-th score so far cannot enter.
	top := pw.top[:0]
	for i := range views {
		v := &views[i]
		if !eligible(r, v, strict) {
			continue
		}
		w, u := weightOf(v, measured), unit(mix(r.Session^v.Key))
		if len(top) == band && w/(1-u)*boundSlack < top[0] {
			continue
		}
		top = pushTop(top, band, -w/math.Log(u))
	}
	pw.top = top
	if len(top) == 0 {
		return out, pw.p.Weight != WeightCapacity
	}
	kth := top[0]
	for i := range views {
		v := &views[i]
		if !eligible(r, v, strict) {
			continue
		}
		w, u := weightOf(v, measured), unit(mix(r.Session^v.Key))
		if w/(1-u)*boundSlack < kth {
			continue
		}
		if -w/math.Log(u) >= kth {
			out = append(out, i)
		}
	}
	return out, pw.p.Weight != WeightCapacity
}

// pushTop adds score s to the k highest scores held in top, a min-heap
// (top[0] the lowest of them).
func pushTop(top []float64, k int, s float64) []float64 {
	return keepBest(top, k, s, func(a, b float64) bool { return a > b })
}
