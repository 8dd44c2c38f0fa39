package policy

import (
	"math"
	"time"
)

// DecayAware is implemented by policies that follow the decay of
// View.ErrorRate and View.Overload between the changes a router tells them
// of (pressure above rankFlatMax backends): a router tells them once how
// fast the two decay. Each must decay no faster than halving every
// half-life (0: it does not decay) while nothing is observed, as
// telemetry.ErrorRate does. A policy never told assumes any decay, and so
// rescores every backend with a rate above zero at every pick.
type DecayAware interface {
	// SetDecay gives the half-lives and refresh, which brings views[i]'s
	// ErrorRate and Overload to now (nil: none).
	SetDecay(errorHalfLife, overloadHalfLife time.Duration, refresh func(now time.Duration, i int))
	// DecaysAll reports whether a pick over n backends reads every view's
	// ErrorRate and Overload, so that the router must bring them all to
	// the pick's time first; if not, the policy calls refresh for those
	// it reads.
	DecaysAll(n int) bool
}

var (
	_ DecayAware = (*Pressure)(nil)
	_ Tracker    = (*Pressure)(nil)
)

// decay is what a Pressure knows of how its views' rates decay.
type decay struct {
	known            bool
	errHalf, ovrHalf time.Duration
	refresh          func(now time.Duration, i int)
}

// SetDecay implements DecayAware.
func (pr *Pressure) SetDecay(errorHalfLife, overloadHalfLife time.Duration, refresh func(now time.Duration, i int)) {
	pr.decay = decay{known: true, errHalf: max(errorHalfLife, 0), ovrHalf: max(overloadHalfLife, 0), refresh: refresh}
}

// DecaysAll implements DecayAware: only the flat pick, and a tree built
// for one pick, read every backend's rates.
func (pr *Pressure) DecaysAll(n int) bool {
	return pr.decay.refresh == nil || !pr.ranksByTree(n) || pr.tree == nil || pr.tree.t.n != n
}

// rates brings views[i]'s rates to now, if the router left that to the
// policy.
func (pr *Pressure) rates(now time.Duration, views []View, i int) {
	if pr.decay.refresh != nil && pr.tree != nil && pr.tree.t.n == len(views) {
		pr.decay.refresh(now, i)
	}
}

// pressTree is pressure's ranking above rankFlatMax backends: a rankTree
// over the placement weights, kept current without scoring every backend
// at each pick. A backend is rescored (refreshOne, as the flat pick
// rescores every backend) at the first pick after
//
//   - the router touched it (Tracker: its load, eligibility, capacity,
//     queue, signals, path, error rate or overload share changed), or
//   - its deadline passed: the earliest time at which the decay of its
//     error rate and overload share could move its level (nextChange), or
//   - it is the home of the session picked (its score decides whether the
//     session stays).
//
// Between those the level cannot change (the projection is idempotent
// and the decay only lowers the score, within the bounds nextChange
// assumes), so every level, and so the tree, equals what rescoring every
// backend at every pick gives (TestPressureTreeExact).
type pressTree struct {
	t *rankTree
	// Backends to rescore at the next pick.
	dirty   []int32
	isDirty []bool
	// burstOnly marks the backends made dirty only by the burst detector
	// coming on: untouched since last rescored, their rates have only
	// decayed since, so a deadline they hold stays valid while their level
	// does not move.
	burstOnly []bool
	// scored is each backend's view as last rescored, less what the score
	// does not read (scoredPart): a touch that changes none of the rest
	// (a backend hidden from one pick and shown again) rescores nothing.
	scored []View
	// The deadlines: a min-heap of positions by due, hpos[i] being i's
	// place in it (-1: none).
	due  []time.Duration
	heap []int32
	hpos []int32
	// pos finds a session's home by its key (the first position with it).
	pos map[uint64]int32
	// burst is whether the burst detector was on at the latest pick.
	burst bool
}

// Track implements Tracker: above rankFlatMax backends, the rank tree over
// the placement weights as they stand; every backend is rescored at the
// next pick.
func (pr *Pressure) Track(views []View) {
	if !pr.ranksByTree(len(views)) {
		pr.tree = nil
		return
	}
	n := len(views)
	if len(pr.state) != n {
		state := make([]BackendWeight, n)
		copy(state, pr.state)
		pr.state = state
	}
	pt := pr.tree
	if pt == nil {
		pt = &pressTree{t: &rankTree{}}
		pr.tree = pt
	}
	t := pt.t
	t.ext = resize(t.ext, n)
	for i := range n {
		t.ext[i] = float64(pr.state[i].Weight)
	}
	t.build(views, false)
	pt.isDirty = resize(pt.isDirty, n)
	pt.burstOnly = resize(pt.burstOnly, n)
	clear(pt.burstOnly)
	pt.scored = resize(pt.scored, n)
	pt.dirty = pt.dirty[:0]
	for i := range n {
		pt.isDirty[i] = true
		pt.dirty = append(pt.dirty, int32(i))
	}
	pt.due = resize(pt.due, n)
	pt.hpos = resize(pt.hpos, n)
	for i := range pt.hpos {
		pt.hpos[i] = -1
	}
	pt.heap = pt.heap[:0]
	if pt.pos == nil {
		pt.pos = make(map[uint64]int32, n)
	}
	clear(pt.pos)
	for i := range views {
		if _, ok := pt.pos[views[i].Key]; !ok {
			pt.pos[views[i].Key] = int32(i)
		}
	}
}

// Prefetch implements Tracker.
func (pr *Pressure) Prefetch(i int) uint64 {
	if pr.tree == nil {
		return 0
	}
	return pr.tree.t.prefetch(i)
}

// Touched implements Tracker: views[i] is rescored at the next pick.
func (pr *Pressure) Touched(views []View, i int) {
	pt := pr.tree
	if pt == nil || pt.t.n != len(views) || i < 0 || i >= len(views) {
		return
	}
	if views[i].Key != pt.t.back[i].key { // not our views: start again
		pr.Track(views)
		return
	}
	pt.t.touched(views, i)
	if scoredPart(&views[i]) != pt.scored[i] {
		pt.mark(i)
	}
}

// scoredPart is v less the fields pressure's score does not read (they
// decide eligibility, or name the backend).
func scoredPart(v *View) View {
	s := *v
	s.Index, s.Key, s.Eligible, s.State, s.MaxModelLen, s.CacheTokens, s.MaxInputTPS = 0, 0, false, 0, 0, 0, 0
	return s
}

// mark puts backend i among those to rescore.
func (pt *pressTree) mark(i int) {
	if !pt.isDirty[i] {
		pt.isDirty[i] = true
		pt.dirty = append(pt.dirty, int32(i))
	}
}

// decayAll brings every view's rates to the latest pick's time, if the
// router left their decay to the policy (Weights reads them all).
func (pr *Pressure) decayAll(views []View) {
	for i := range views {
		pr.rates(pr.now, views, i)
	}
}

// refreshed follows a rescoring of every backend (Weights): the tree takes
// the new weights, and every backend whose rates decay is rescored at the
// next pick, which sets its deadline.
func (pr *Pressure) refreshed(views []View) {
	pt := pr.tree
	if pt == nil || pt.t.n != len(views) {
		return
	}
	for i := range views {
		pt.t.setWeight(views, i, float64(pr.state[i].Weight))
		if pt.hpos[i] >= 0 || views[i].ErrorRate > 0 || views[i].Overload > 0 {
			pt.mark(i)
		}
	}
}

// catchUp rescores the backends due at now (touched, past their deadline,
// or home, the session's home or -1) and updates their weights in the tree;
// burst is whether the burst detector is on. When it comes on every backend
// is rescored: a level held back by the projector's hysteresis may move
// now. While it is on the rule changes nothing else: it moves levels to
// more pressure only, and nothing but a touch (rescored) raises a score.
// A backend rescored only for that, whose level stays, keeps its deadline:
// computed from its rates when last rescored, and those have only decayed
// since, it is no later than one computed now (nextChange).
func (pr *Pressure) catchUp(now time.Duration, views []View, home int, burst bool) {
	pt := pr.tree
	if burst && !pt.burst {
		for i := range views {
			if !pt.isDirty[i] {
				pt.burstOnly[i] = true
				pt.mark(i)
			}
		}
	}
	pt.burst = burst
	for len(pt.heap) > 0 && pt.due[pt.heap[0]] <= now {
		i := int(pt.heap[0])
		pt.unschedule(i)
		pt.mark(i)
	}
	for _, i := range pt.dirty {
		pt.isDirty[i] = false
		st := &pr.state[i]
		was, burstOnly := st.Rank, pt.burstOnly[i]
		pt.burstOnly[i] = false
		pr.rates(now, views, int(i))
		pr.refreshOne(&views[i], st, burst)
		pt.scored[i] = scoredPart(&views[i])
		pt.t.setWeight(views, int(i), float64(st.Weight))
		if burstOnly && st.Rank == was && pt.hpos[i] >= 0 {
			continue // its deadline stands
		}
		if at, ok := pr.nextChange(&views[i], st.Rank, now); ok {
			pt.schedule(int(i), at)
		} else {
			pt.unschedule(int(i))
		}
	}
	pt.dirty = pt.dirty[:0]
	if home < 0 {
		return
	}
	// The home's level cannot have moved (it was not due), but its score
	// has, and decides whether the session stays.
	st := &pr.state[home]
	was := st.Rank
	pr.rates(now, views, home)
	pr.refreshOne(&views[home], st, burst)
	if st.Rank != was { // cannot happen while the deadlines hold; stay exact if it does
		pt.t.setWeight(views, home, float64(st.Weight))
		pt.mark(home)
	}
}

// nextChange is the earliest time, from now, at which the decay of v's
// error rate and overload share could move its level from level, and
// whether there is one. Each rate r decays no faster than r * 2^(-dt/h)
// (DecayAware), the score falls as they do, and the levels a score keeps
// form an interval (telemetry.Projector), so the level stays while the
// score computed with those lower bounds keeps it. Untold of the decay, it
// is now: the backend is rescored at every pick while a rate is above zero.
func (pr *Pressure) nextChange(v *View, level int, now time.Duration) (time.Duration, bool) {
	if v.ErrorRate <= 0 && v.Overload <= 0 {
		return 0, false
	}
	if !pr.decay.known {
		return now, true
	}
	if pr.keeps(v, level, -1) {
		return 0, false // the rates' decay to zero keeps the level
	}
	// Past 64 half-lives of the slower rate both are below 2^-64 of what
	// they were: if the level still holds there, rescore then. The bound
	// stays far below the largest Duration, so hi never overflows.
	bound := time.Duration(math.MaxInt64 / 4)
	if h := max(pr.decay.errHalf, pr.decay.ovrHalf); h < bound/64 {
		bound = max(64*h, time.Millisecond)
	}
	lo, hi := time.Duration(0), time.Millisecond
	for pr.keeps(v, level, hi) {
		if hi >= bound {
			return addClamped(now, hi), true
		}
		lo, hi = hi, 2*hi
	}
	for hi-lo > time.Microsecond {
		mid := lo + (hi-lo)/2
		if pr.keeps(v, level, mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return addClamped(now, max(lo-time.Microsecond, 0)), true
}

// addClamped is now+d (d >= 0), at most the largest Duration.
func addClamped(now, d time.Duration) time.Duration {
	if d > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + d
}

// keeps reports whether v's level stays at level with its rates decayed
// for dt at the fastest (dt < 0: to zero). The decay only lowers the score,
// and the burst detector's rule moves levels only to more pressure, so the
// projector's rule decides.
func (pr *Pressure) keeps(v *View, level int, dt time.Duration) bool {
	probe := *v
	probe.ErrorRate *= decayed(dt, pr.decay.errHalf)
	probe.Overload *= decayed(dt, pr.decay.ovrHalf)
	st := BackendWeight{Rank: level}
	pr.refreshOne(&probe, &st, false)
	return st.Rank == level
}

// decayed is the factor by which a rate halving every h falls in dt (dt <
// 0: to zero; h = 0: it does not decay).
func decayed(dt, h time.Duration) float64 {
	switch {
	case h <= 0:
		return 1
	case dt < 0:
		return 0
	}
	return math.Exp2(-float64(dt) / float64(h))
}

// schedule sets backend i's deadline to at.
func (pt *pressTree) schedule(i int, at time.Duration) {
	if pt.hpos[i] < 0 {
		pt.due[i] = at
		pt.hpos[i] = int32(len(pt.heap))
		pt.heap = append(pt.heap, int32(i))
		pt.up(int(pt.hpos[i]))
		return
	}
	old := pt.due[i]
	pt.due[i] = at
	if at < old {
		pt.up(int(pt.hpos[i]))
	} else {
		pt.down(int(pt.hpos[i]))
	}
}

// unschedule drops backend i's deadline, if any.
func (pt *pressTree) unschedule(i int) {
	k := int(pt.hpos[i])
	if k < 0 {
		return
	}
	pt.hpos[i] = -1
	last := len(pt.heap) - 1
	if k != last {
		pt.heap[k] = pt.heap[last]
		pt.hpos[pt.heap[k]] = int32(k)
	}
	pt.heap = pt.heap[:last]
	if k < last {
		pt.down(k)
		pt.up(k)
	}
}

// less orders the deadlines by time, then position.
func (pt *pressTree) less(a, b int) bool {
	x, y := pt.heap[a], pt.heap[b]
	if pt.due[x] != pt.due[y] {
		return pt.due[x] < pt.due[y]
	}
	return x < y
}

func (pt *pressTree) swap(a, b int) {
	pt.heap[a], pt.heap[b] = pt.heap[b], pt.heap[a]
	pt.hpos[pt.heap[a]], pt.hpos[pt.heap[b]] = int32(a), int32(b)
}

func (pt *pressTree) up(k int) {
	for k > 0 {
		p := (k - 1) / 2
		if !pt.less(k, p) {
			return
		}
		pt.swap(k, p)
		k = p
	}
}

func (pt *pressTree) down(k int) {
	for {
		l, m := 2*k+1, k
		if l < len(pt.heap) && pt.less(l, m) {
			m = l
		}
		if l+1 < len(pt.heap) && pt.less(l+1, m) {
			m = l + 1
		}
		if m == k {
			return
		}
		pt.swap(k, m)
		k = m
	}
}

// pickTree is Pick over the rank tree: the tracked one brought up to date
// (catchUp), or one built for this pick over every backend rescored. The
// session's home, if it stays, ranks first; then pulsar-waw's band over
// the tree's ranking.
func (pr *Pressure) pickTree(now time.Duration, r *Request, views []View, burst bool) Decision {
	var key uint64
	hasHome := false
	if pr.sticky != nil {
		key, hasHome = pr.sticky.get(now, r.Session)
	}
	home := -1
	var t *rankTree
	if pt := pr.tree; pt != nil && pt.t.n == len(views) {
		if hasHome {
			if i, ok := pt.pos[key]; ok {
				home = int(i)
			}
		}
		pr.catchUp(now, views, home, burst)
		t = pt.t
	} else {
		pr.refresh(views, burst)
		if pr.scratch == nil {
			pr.scratch = &rankTree{}
		}
		t = pr.scratch
		t.ext = resize(t.ext, len(views))
		for i := range views {
			t.ext[i] = float64(pr.state[i].Weight)
		}
		t.build(views, false)
		if hasHome {
			home = viewOf(views, key)
		}
	}
	strict := t.exclusions(r)
	if home >= 0 && !pr.stays(r, views, home, strict, t) {
		home = -1
	}
	var d Decision
	switch {
	case home < 0:
		d = treeBand(pr.p, t, now, r, views)
	case views[home].Free():
		d = dispatch(home)
	default: // the home ranks first, ahead of its place in the race
		free, tf := t.bestFree(r.Session)
		d = bandDecide(pr.p, now, r, views, home, free, func(limit int) int {
			n := t.countBefore(r.Session, tf, limit)
			if !(t.timeOf(r.Session, home) < tf) {
				n = min(n+1, limit)
			}
			return n
		})
	}
	if pr.sticky != nil && d.Kind == Dispatch {
		pr.sticky.put(now, r.Session, views[d.Backend].Key)
	}
	return d
}

// stays is home for the tree: whether the session stays on backend h (a
// candidate for r, then staysOn).
func (pr *Pressure) stays(r *Request, views []View, h int, strict bool, t *rankTree) bool {
	if !views[h].Eligible || (strict && t.excluded(int32(h))) {
		return false
	}
	return pr.staysOn(r, views, h, false, strict)
}
