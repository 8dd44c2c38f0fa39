package policy

import (
	"slices"
	"time"
)

// WaW is consistent-hash affinity with a bounded wait and overflow by
// utilization (see the package documentation).
type WaW struct {
	p      Params
	points []ringPoint // sorted by hash
	idx    *minIndex   // utilizations of the eligible backends, once tracked (Tracker)
	// The ring's hashes apart (a search reads 8 bytes a point, not 16),
	// and where each run of hashes with the same top bits starts in it:
	// bucket[j] is the first point whose hash >> shift is >= j. About one
	// point a bucket, so a session's place on a ring of 30,000 points (200
	// backends) costs two or three reads, not a binary search of 15 steps
	// through 480 KB for each router.
	hashes []uint64
	bucket []int32
	shift  uint
}

type ringPoint struct {
	hash    uint64
	backend int
}

var (
	_ Policy     = (*WaW)(nil)
	_ Membership = (*WaW)(nil)
)

// NewWaW builds the ring over backends, whose order is the views' order.
func NewWaW(p Params, backends []Backend) *WaW {
	w := &WaW{p: p}
	w.SetBackends(backends, nil)
	return w
}

// SetBackends implements Membership: the ring is built again over backends
// (a backend's points depend only on its key, so sessions move only from
// and to the backends that changed).
func (w *WaW) SetBackends(backends []Backend, _ []int) {
	w.points = make([]ringPoint, 0, len(backends)*w.p.VirtualNodes)
	for i, b := range backends {
		for v := range w.p.VirtualNodes {
			w.points = append(w.points, ringPoint{hash: mix(b.Key ^ mix(uint64(v)+1)), backend: i})
		}
	}
	slices.SortFunc(w.points, func(a, b ringPoint) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return a.backend - b.backend
	})
	w.indexRing()
}

// indexRing builds hashes and bucket from points.
func (w *WaW) indexRing() {
	n := len(w.points)
	k := 1
	for 1<<k < n {
		k++
	}
	w.shift = uint(64 - k)
	w.hashes = make([]uint64, n)
	w.bucket = make([]int32, 1<<k+1)
	j := 0
	for i, p := range w.points {
		w.hashes[i] = p.hash
		for top := int(p.hash >> w.shift); j <= top; j++ {
			w.bucket[j] = int32(i)
		}
	}
	for ; j < len(w.bucket); j++ {
		w.bucket[j] = int32(n)
	}
}

// ringStart is the first point whose hash is >= h (len(points) if none):
// a binary search within h's bucket.
func (w *WaW) ringStart(h uint64) int {
	top := h >> w.shift
	lo, hi := int(w.bucket[top]), int(w.bucket[top+1])
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if w.hashes[m] < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// Name implements Policy.
func (*WaW) Name() string { return "waw" }

// Affine returns the first eligible backend clockwise from the session's hash,
// or -1 if none is.
func (w *WaW) Affine(r *Request, views []View, strict bool) int {
	h := mix(r.Session)
	start := w.ringStart(h)
	for k := range len(w.points) {
		b := w.points[(start+k)%len(w.points)].backend
		if b < len(views) && eligible(r, &views[b], strict) {
			return b
		}
	}
	return -1
}

// Pick implements Policy.
func (w *WaW) Pick(now time.Duration, r *Request, views []View) Decision {
	strict := anyEligible(r, views)
	a := w.Affine(r, views, strict)
	if a < 0 {
		return reject("no eligible backend")
	}
	if views[a].Free() {
		return dispatch(a)
	}
	if until := r.Arrived + w.p.AffinityWait; now < until && (r.QueuedAt == a || views[a].Queued < w.p.MaxQueued) {
		return Decision{Kind: Wait, Backend: a, Until: until}
	}
	if w.idx.tracked(views) {
		return dispatch(leastIndexed(w.idx, r))
	}
	best := -1
	for i := range views {
		if eligible(r, &views[i], strict) && (best < 0 || views[i].Utilization() < views[best].Utilization()) {
			best = i
		}
	}
	return dispatch(best)
}
