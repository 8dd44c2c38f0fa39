package policy

import (
	"math/rand/v2"
	"time"
)

// RoundRobin cycles through eligible backends.
type RoundRobin struct{ next int }

var _ Policy = (*RoundRobin)(nil)

// Name implements Policy.
func (*RoundRobin) Name() string { return "round-robin" }

// Pick implements Policy.
func (p *RoundRobin) Pick(_ time.Duration, r *Request, views []View) Decision {
	strict := anyEligible(r, views)
	for range views {
		i := p.next % len(views)
		p.next = i + 1
		if eligible(r, &views[i], strict) {
			return dispatch(i)
		}
	}
	return reject("no eligible backend")
}

// Random picks uniformly among eligible backends.
type Random struct {
	rng *rand.Rand
	idx *minIndex // the eligible backends, once tracked (Tracker)
}

var _ Policy = (*Random)(nil)

// Name implements Policy.
func (*Random) Name() string { return "random" }

// Pick implements Policy.
func (p *Random) Pick(_ time.Duration, r *Request, views []View) Decision {
	if p.idx.tracked(views) {
		return p.pickIndexed(r)
	}
	strict := anyEligible(r, views)
	n := 0
	for i := range views {
		if eligible(r, &views[i], strict) {
			n++
		}
	}
	if n == 0 {
		return reject("no eligible backend")
	}
	k := p.rng.IntN(n)
	for i := range views {
		if eligible(r, &views[i], strict) {
			if k == 0 {
				return dispatch(i)
			}
			k--
		}
	}
	return reject("no eligible backend")
}

// LeastRequest picks the backend with the fewest outstanding requests.
type LeastRequest struct {
	idx *minIndex // outstanding requests of the eligible backends, once tracked (Tracker)
}

var _ Policy = LeastRequest{}

// Name implements Policy.
func (LeastRequest) Name() string { return "least-request" }

// Pick implements Policy.
func (p LeastRequest) Pick(_ time.Duration, r *Request, views []View) Decision {
	if p.idx.tracked(views) {
		if best := leastIndexed(p.idx, r); best >= 0 {
			return dispatch(best)
		}
		return reject("no eligible backend")
	}
	strict := anyEligible(r, views)
	best := -1
	for i := range views {
		if eligible(r, &views[i], strict) && (best < 0 || views[i].Outstanding() < views[best].Outstanding()) {
			best = i
		}
	}
	if best < 0 {
		return reject("no eligible backend")
	}
	return dispatch(best)
}

// PowerOfTwo samples two distinct eligible backends and keeps the one with
// fewer outstanding requests.
type PowerOfTwo struct{ rng *rand.Rand }

var _ Policy = (*PowerOfTwo)(nil)

// Name implements Policy.
func (*PowerOfTwo) Name() string { return "power-of-two" }

// Pick implements Policy.
func (p *PowerOfTwo) Pick(_ time.Duration, r *Request, views []View) Decision {
	strict := anyEligible(r, views)
	// Rejection sampling: cheap when most backends are eligible.
	var picks [2]int
	n := 0
	for tries := 0; n < 2 && tries < 8*len(views); tries++ {
		i := p.rng.IntN(len(views))
		if eligible(r, &views[i], strict) && (n == 0 || picks[0] != i) {
			picks[n] = i
			n++
		}
	}
	switch n {
	case 0:
		return LeastRequest{}.Pick(0, r, views)
	case 1:
		return dispatch(picks[0])
	}
	a, b := picks[0], picks[1]
	if views[b].Outstanding() < views[a].Outstanding() {
		a = b
	}
	return dispatch(a)
}
