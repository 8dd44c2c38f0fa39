package policy

import (
	"math"
	"slices"
)

// Tracker is implemented by policies that keep an index over the views
// (least-request, random, waw's overflow; pulsar-waw's and pressure's rank
// trees) instead of scanning every view on every pick. A router that calls
// Track promises to call Touched after every later change of a view's
// Eligible, Capacity, Active, Waiting, Pending, Queued or MaxInputTPS, of
// its Signals or Path, and of its ErrorRate or Overload other than by
// decay (DecayAware), and Track again whenever
// backends join or leave; the picks then cost O(log n) instead of O(n),
// with the same decisions. A policy that was never tracked, or is handed
// views of another length, scans. Signals are compared by pointer: a
// router whose signals change hands a new *telemetry.Signals in the view
// before it touches, never rewrites the one it handed in place (pressure
// would see no change and keep the old score).
type Tracker interface {
	// Track indexes views, the slice later picks will be given.
	Track(views []View)
	// Touched says views[i] changed.
	Touched(views []View, i int)
	// Prefetch reads, changing nothing, the per-backend state Touched(views,
	// i) reads first and returns a value derived from it, which the caller
	// keeps so the read is not dropped. A shell delivering a batch of stats
	// messages asks, through router.Router.Prefetch, for every message's
	// backend before it touches any, so the cache misses overlap.
	Prefetch(i int) uint64
}

var (
	_ Tracker = (*Random)(nil)
	_ Tracker = (*LeastRequest)(nil)
	_ Tracker = (*WaW)(nil)
)

// minIndex keeps, over positions 0..n-1, the present position with the
// smallest key, ties to the lowest position, and how many are present: a
// segment tree, O(log n) per change and per range query.
type minIndex struct {
	n     int
	size  int       // leaves: a power of two >= n
	key   []float64 // per position; NaN: absent
	best  []int32   // per node: its best position, -1 if none
	count []int32   // per node: positions present
	ex    []int     // scratch: a request's exclusions
}

func newMinIndex(n int) *minIndex {
	size := 1
	for size < n {
		size *= 2
	}
	m := &minIndex{n: n, size: size, key: make([]float64, n), best: make([]int32, 2*size), count: make([]int32, 2*size)}
	for i := range m.key {
		m.key[i] = math.NaN()
	}
	for i := range m.best {
		m.best[i] = -1
	}
	return m
}

// better is the better of two positions (-1: none).
func (m *minIndex) better(a, b int32) int32 {
	switch {
	case a < 0:
		return b
	case b < 0:
		return a
	case m.key[b] < m.key[a] || (m.key[b] == m.key[a] && b < a):
		return b
	}
	return a
}

// set makes position i present with key k, or absent if !present.
func (m *minIndex) set(i int, k float64, present bool) {
	if !present {
		k = math.NaN()
	}
	node := m.size + i
	if (m.count[node] == 1) == present && math.Float64bits(m.key[i]) == math.Float64bits(k) {
		return // unchanged: the nodes above are what they would be recomputed
	}
	m.key[i] = k
	m.best[node], m.count[node] = -1, 0
	if present {
		m.best[node], m.count[node] = int32(i), 1
	}
	for node /= 2; node >= 1; node /= 2 {
		m.best[node] = m.better(m.best[2*node], m.best[2*node+1])
		m.count[node] = m.count[2*node] + m.count[2*node+1]
	}
}

// min is the best present position in [lo, hi), -1 if none.
func (m *minIndex) min(lo, hi int) int32 {
	best := int32(-1)
	for l, r := lo+m.size, hi+m.size; l < r; l, r = l/2, r/2 {
		if l&1 == 1 {
			best = m.better(best, m.best[l])
			l++
		}
		if r&1 == 1 {
			r--
			best = m.better(best, m.best[r])
		}
	}
	return best
}

// minExcept is the best present position outside the sorted positions ex.
func (m *minIndex) minExcept(ex []int) int32 {
	best, lo := int32(-1), 0
	for _, e := range ex {
		best = m.better(best, m.min(lo, e))
		lo = e + 1
	}
	return m.better(best, m.min(lo, m.n))
}

// nth is the k-th present position (from 0), -1 if there are not k+1.
func (m *minIndex) nth(k int) int {
	if k < 0 || k >= int(m.count[1]) {
		return -1
	}
	node := 1
	for node < m.size {
		if c := int(m.count[2*node]); k < c {
			node = 2 * node
		} else {
			k -= c
			node = 2*node + 1
		}
	}
	return node - m.size
}

// present reports whether position i is present.
func (m *minIndex) present(i int) bool { return m.count[m.size+i] == 1 }

// indexOver builds an index over views' eligible positions by key.
func indexOver(views []View, key func(*View) float64) *minIndex {
	m := newMinIndex(len(views))
	for i := range views {
		m.set(i, key(&views[i]), views[i].Eligible)
	}
	return m
}

// tracked reports whether m indexes views.
func (m *minIndex) tracked(views []View) bool { return m != nil && m.n == len(views) }

// prefetch reads position i's key and leaf (see Tracker.Prefetch).
func (m *minIndex) prefetch(i int) uint64 {
	if m == nil || i < 0 || i >= m.n {
		return 0
	}
	return math.Float64bits(m.key[i]) + uint64(m.count[m.size+i])
}

// strictExclusions returns the request's excluded positions that are
// present, sorted and without repeats, in buf, and whether some present
// position is not excluded (eligible's strict mode).
func (m *minIndex) strictExclusions(r *Request) ([]int, bool) {
	buf := m.ex[:0]
	for _, x := range r.Exclude {
		if x >= 0 && x < m.n && m.present(x) {
			buf = append(buf, x)
		}
	}
	slices.Sort(buf)
	buf = slices.Compact(buf)
	m.ex = buf
	return buf, int(m.count[1]) > len(buf)
}

func outstandingKey(v *View) float64 { return float64(v.Outstanding()) }

func utilizationKey(v *View) float64 { return v.Utilization() }

// Track implements Tracker.
func (p *Random) Track(views []View) { p.idx = indexOver(views, outstandingKey) }

// Prefetch implements Tracker.
func (p *Random) Prefetch(i int) uint64 { return p.idx.prefetch(i) }

// Touched implements Tracker.
func (p *Random) Touched(views []View, i int) {
	if p.idx.tracked(views) {
		p.idx.set(i, 0, views[i].Eligible)
	}
}

// pickIndexed is Pick over the index: the same draw from the rng, the same
// backend.
func (p *Random) pickIndexed(r *Request) Decision {
	ex, strict := p.idx.strictExclusions(r)
	n := int(p.idx.count[1])
	if strict {
		n -= len(ex)
	} else {
		ex = ex[:0]
	}
	if n == 0 {
		return reject("no eligible backend")
	}
	k := p.rng.IntN(n)
	pos := p.idx.nth(k)
	for _, e := range ex {
		if e > pos {
			break
		}
		k++
		pos = p.idx.nth(k)
	}
	return dispatch(pos)
}

// Track implements Tracker.
func (p *LeastRequest) Track(views []View) { p.idx = indexOver(views, outstandingKey) }

// Prefetch implements Tracker.
func (p *LeastRequest) Prefetch(i int) uint64 { return p.idx.prefetch(i) }

// Touched implements Tracker.
func (p *LeastRequest) Touched(views []View, i int) {
	if p.idx.tracked(views) {
		p.idx.set(i, outstandingKey(&views[i]), views[i].Eligible)
	}
}

// leastIndexed is the eligible position with the smallest key over idx
// (ties to the lowest), honouring r's exclusions as eligible does; -1 if
// none.
func leastIndexed(idx *minIndex, r *Request) int {
	ex, strict := idx.strictExclusions(r)
	if !strict {
		return int(idx.min(0, idx.n))
	}
	return int(idx.minExcept(ex))
}

// Track implements Tracker: the index of the overflow's utilizations.
func (w *WaW) Track(views []View) { w.idx = indexOver(views, utilizationKey) }

// Prefetch implements Tracker.
func (w *WaW) Prefetch(i int) uint64 { return w.idx.prefetch(i) }

// Touched implements Tracker.
func (w *WaW) Touched(views []View, i int) {
	if w.idx.tracked(views) {
		w.idx.set(i, utilizationKey(&views[i]), views[i].Eligible)
	}
}
