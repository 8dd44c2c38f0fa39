package policy

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/prefix"
)

// PrefixName is the prefix-aware policy's registry name.
const PrefixName = "prefix"

// PrefixParams are the prefix policy's tunables (the policy's `prefix:` map
// in a fleet file).
type PrefixParams struct {
	// TokensPerSlot sizes each backend's index: a backend of capacity c
	// (its maximum engine concurrency) is taken to cache about
	// c*TokensPerSlot prompt tokens. Unset (0), a backend whose view gives
	// its whole cache capacity (View.CacheTokens: GPU KV and host tier, as
	// the simulator derives it from the engine profile) is taken to cache
	// that, and any other c*40,000: the full-scale engine profile's KV
	// budget (1,000,000 tokens) over its 25 sequences. Set, it overrides
	// both.
	TokensPerSlot int `yaml:"tokens_per_slot" json:"tokens_per_slot"`
	// LoadSlack is how far (in utilization, outstanding over capacity) a
	// backend may run above the fleet's utilization and still be preferred
	// for the prefix it holds; above it, it is placed as pulsar-waw would.
	LoadSlack float64 `yaml:"load_slack" json:"load_slack"`
	// MinShare is the share of the prompt's blocks a backend must hold for
	// its prefix to count: a shorter match (a system prompt every backend
	// soon holds) leaves the choice to pulsar-waw's order, so that the
	// first backend to see a common prefix does not draw every request.
	MinShare float64 `yaml:"min_share" json:"min_share"`
	// MaxAge forgets blocks not sent to a backend for this long (0: never;
	// they leave by capacity only).
	MaxAge time.Duration `yaml:"max_age" json:"max_age"`
	// MaxBlocks bounds the blocks the index holds over every backend
	// together (0: DefaultPrefixMaxBlocks), so that backends claiming
	// huge caches cannot make a router's memory grow without bound
	// (prefix.Index.SetBudget).
	MaxBlocks int `yaml:"max_blocks" json:"max_blocks"`
}

// DefaultPrefixMaxBlocks is the index's default budget: 4Mi blocks, about
// 350 MB (prefix.BytesPerBlock each), room for twenty 8-GPU backends'
// whole GPU caches in 64-token chunks.
const DefaultPrefixMaxBlocks = 4 << 20

// DefaultTokensPerSlot is the index size per unit of capacity for a
// backend whose cache capacity is unknown (see PrefixParams.TokensPerSlot).
const DefaultTokensPerSlot = 40_000

// DefaultPrefixParams are the prefix policy's defaults. TokensPerSlot is
// left unset: each backend's index is sized from its cache capacity.
func DefaultPrefixParams() PrefixParams {
	return PrefixParams{LoadSlack: 0.25, MinShare: 0.5}
}

func (p PrefixParams) validate() []error {
	var errs []error
	if p.TokensPerSlot < 0 {
		errs = append(errs, fmt.Errorf("prefix.tokens_per_slot must be >= 0 (0: the backend's cache capacity, else %d), got %d", DefaultTokensPerSlot, p.TokensPerSlot))
	}
	if !(p.LoadSlack >= 0) || math.IsInf(p.LoadSlack, 1) {
		errs = append(errs, fmt.Errorf("prefix.load_slack must be a finite number >= 0, got %v", p.LoadSlack))
	}
	if !(p.MinShare >= 0 && p.MinShare <= 1) {
		errs = append(errs, fmt.Errorf("prefix.min_share must be in [0,1], got %v", p.MinShare))
	}
	if p.MaxAge < 0 {
		errs = append(errs, fmt.Errorf("prefix.max_age must be >= 0, got %v", p.MaxAge))
	}
	if p.MaxBlocks < 0 {
		errs = append(errs, fmt.Errorf("prefix.max_blocks must be >= 0 (0: %d), got %d", DefaultPrefixMaxBlocks, p.MaxBlocks))
	}
	return errs
}

// Prefix places a request at the backend holding the longest cached prefix
// of its prompt, by an approximate per-backend index of the blocks sent
// there (package prefix), unless that backend runs hotter than the fleet by
// more than LoadSlack: then, and for requests without block hashes, it
// places as pulsar-waw (see the package documentation).
type Prefix struct {
	p       Params
	perSlot bool // TokensPerSlot was given: it sizes every backend
	pw      *PulsarWaW
	idx     *prefix.Index
	ids     []prefix.ID // index ID of each backend, by view position
	matched []int32     // scratch: matched blocks by index ID
	// Scratch by view position: held prefix, rank score and its bound.
	prefix, scores, bounds []float64
	// pos is each index ID's view position (-1: none), for the rank tree's
	// picks; cand their scratch.
	pos  []int32
	cand []prefixCand
	// level counts the holders by blocks held, and held is what each
	// position holds that counts, for pickDense.
	level []int
	held  []int32
}

// prefixCand is a backend holding a prefix that counts, for a pick over the
// rank tree: its position, the blocks it holds and its rendezvous time.
type prefixCand struct {
	pos int
	m   int32
	t   float64
}

var (
	_ Policy         = (*Prefix)(nil)
	_ Membership     = (*Prefix)(nil)
	_ WeightReporter = (*Prefix)(nil)
	_ Tracker        = (*Prefix)(nil)
)

// NewPrefix returns the policy over backends, in the views' order.
func NewPrefix(p Params, backends []Backend) (*Prefix, error) {
	perSlot := p.Prefix.TokensPerSlot != 0
	if !perSlot {
		p.Prefix.TokensPerSlot = DefaultTokensPerSlot
	}
	if errs := p.Prefix.validate(); len(errs) > 0 {
		return nil, fmt.Errorf("policy %s: %w", PrefixName, errors.Join(errs...))
	}
	pp := &Prefix{p: p, perSlot: perSlot, pw: NewPulsarWaW(p, backends), idx: prefix.New(p.Prefix.MaxAge)}
	pp.idx.SetBudget(cmp.Or(p.Prefix.MaxBlocks, DefaultPrefixMaxBlocks))
	pp.SetBackends(backends, nil)
	return pp, nil
}

// Name implements Policy.
func (*Prefix) Name() string { return PrefixName }

// Weights implements WeightReporter: pulsar-waw's weights, which decide
// every placement the prefix does not.
func (pp *Prefix) Weights(views []View, out []BackendWeight) []BackendWeight {
	return pp.pw.Weights(views, out)
}

// Index is the policy's prefix index (for reports: its size, its memory).
func (pp *Prefix) Index() *prefix.Index { return pp.idx }

// SetBackends implements Membership: the backends that stay keep their
// indexed blocks; those that left are dropped from the index.
func (pp *Prefix) SetBackends(backends []Backend, from []int) {
	old := pp.ids
	kept := make([]bool, len(old))
	ids := make([]prefix.ID, len(backends))
	for i := range backends {
		f := i
		if from != nil {
			f = from[i]
		}
		if f >= 0 && f < len(old) && !kept[f] {
			ids[i], kept[f] = old[f], true
			continue
		}
		// Capacity 1 until the first dispatch sizes it from the view.
		ids[i], _ = pp.idx.Add(1)
	}
	for f, k := range kept {
		if !k {
			pp.idx.Remove(old[f])
		}
	}
	pp.ids = ids
	pp.pos = pp.pos[:0]
	for i, id := range ids {
		for int(id) >= len(pp.pos) {
			pp.pos = append(pp.pos, -1)
		}
		pp.pos[id] = int32(i)
	}
}

// Track implements Tracker: pulsar-waw's rank tree, which orders the
// backends above rankFlatMax.
func (pp *Prefix) Track(views []View) { pp.pw.Track(views) }

// Prefetch implements Tracker.
func (pp *Prefix) Prefetch(i int) uint64 { return pp.pw.Prefetch(i) }

// Touched implements Tracker.
func (pp *Prefix) Touched(views []View, i int) { pp.pw.Touched(views, i) }

// Pick implements Policy.
func (pp *Prefix) Pick(now time.Duration, r *Request, views []View) Decision {
	d := pp.pick(now, r, views)
	if d.Kind == Dispatch && len(r.Blocks) > 0 && r.BlockTokens > 0 && d.Backend >= 0 && d.Backend < len(pp.ids) {
		pp.record(now, r, &views[d.Backend], pp.ids[d.Backend])
	}
	return d
}

// record adds a dispatched prompt's blocks to its backend's index, sized
// from the backend's cache capacity first.
func (pp *Prefix) record(now time.Duration, r *Request, v *View, id prefix.ID) {
	want := int(min(pp.cacheTokens(v)/int64(r.BlockTokens), math.MaxInt32))
	if pp.idx.Capacity(id) != max(want, 1) {
		_ = pp.idx.SetCapacity(id, max(want, 1)) // id is live: it is in pp.ids
	}
	pp.idx.Insert(id, r.Blocks, now)
}

// cacheTokens is how many prompt tokens backend v is taken to cache (see
// PrefixParams.TokensPerSlot).
func (pp *Prefix) cacheTokens(v *View) int64 {
	if !pp.perSlot && v.CacheTokens > 0 {
		return int64(v.CacheTokens)
	}
	return int64(max(v.Capacity, 1)) * int64(pp.p.Prefix.TokensPerSlot)
}

func (pp *Prefix) pick(now time.Duration, r *Request, views []View) Decision {
	if len(r.Blocks) == 0 || len(views) != len(pp.ids) {
		return pp.pw.Pick(now, r, views)
	}
	// Matches under min_share of the prompt do not count, so the index
	// need not walk the blocks every backend holds.
	minBlocks := max(int(math.Ceil(pp.p.Prefix.MinShare*float64(len(r.Blocks)))), 1)
	var best int
	pp.matched, best = pp.idx.MatchAtLeast(r.Blocks, minBlocks, now, pp.matched)
	if best == 0 {
		return pp.pw.Pick(now, r, views)
	}
	if t := pp.pw.treeFor(views); t != nil {
		return pp.pickTree(t, now, r, views)
	}
	strict := anyEligible(r, views)
	outstanding, capacity := 0, 0
	for i := range views {
		if eligible(r, &views[i], strict) {
			outstanding += views[i].Outstanding()
			capacity += max(views[i].Capacity, 1)
		}
	}
	limit := float64(outstanding)/float64(max(capacity, 1)) + pp.p.Prefix.LoadSlack
	measured := pp.pw.useMeasured(views)
	// A backend's score is the prefix it holds (in blocks; none if it runs
	// above the limit) plus its rendezvous score squashed into (0,1), so
	// backends rank by prefix first and by pulsar-waw's order among equal
	// prefixes. As in PulsarWaW.Pick, the logarithm is computed only for
	// the backends whose upper bound can beat the best so far.
	pp.scores = resize(pp.scores, len(views))
	pp.bounds = resize(pp.bounds, len(views))
	pp.prefix = resize(pp.prefix, len(views))
	top, free := -1, -1
	topScore, freeScore := math.Inf(-1), math.Inf(-1)
	for i := range views {
		v := &views[i]
		if !eligible(r, v, strict) {
			pp.scores[i], pp.bounds[i] = math.Inf(-1), math.Inf(-1)
			continue
		}
		m := float64(pp.matched[pp.ids[i]])
		if v.Utilization() > limit {
			m = 0
		}
		pp.prefix[i] = m
		bound := m + squash(weightOf(v, measured)/(1-unit(mix(r.Session^v.Key)))*boundSlack)
		pp.bounds[i], pp.scores[i] = bound, math.NaN()
		isFree := v.Free()
		if bound <= topScore && (!isFree || bound <= freeScore) {
			continue
		}
		sc := pp.score(r, v, m, measured)
		pp.scores[i] = sc
		if sc > topScore {
			top, topScore = i, sc
		}
		if isFree && sc > freeScore {
			free, freeScore = i, sc
		}
	}
	return bandDecide(pp.p, now, r, views, top, free, func(limit int) int {
		rank := 0
		for i, b := range pp.bounds {
			if rank >= limit {
				break
			}
			if b <= freeScore { // also skips the ineligible (-Inf)
				continue
			}
			sc := pp.scores[i]
			if math.IsNaN(sc) {
				sc = pp.score(r, &views[i], pp.prefix[i], measured)
			}
			if sc > freeScore {
				rank++
			}
		}
		return rank
	})
}

// pickTree is pick over pulsar-waw's rank tree: the backends holding a
// prefix that counts rank first, by the blocks they hold and then by the
// tree's order, and every other backend after them in the tree's order.
// Only the backends holding a prefix are visited (pp.matched, by index
// ID, is scanned once: 4 bytes per backend).
func (pp *Prefix) pickTree(t *rankTree, now time.Duration, r *Request, views []View) Decision {
	t.exclusions(r)
	outstanding, capacity := t.sumOut, t.sumCap
	for _, x := range t.ex {
		outstanding -= t.back[x].out
		capacity -= t.back[x].capa
	}
	limit := float64(outstanding)/float64(max(capacity, 1)) + pp.p.Prefix.LoadSlack
	// Only the band's worth of holders is kept (the band's count stops at
	// its width), and the best free one: with a prefix every backend
	// holds, the cost is one pass over the holders, not a sort of them.
	band := bandOf(pp.p, now, r)
	var sel prefixBest
	sel.reset(band, pp.cand)
	held := func(i int) int32 { // the blocks position i holds that count, 0 for none
		id := int(pp.ids[i])
		if id >= len(pp.matched) {
			return 0
		}
		m := pp.matched[id]
		if m == 0 || !t.back[i].isElig || t.excluded(int32(i)) || views[i].Utilization() > limit {
			return 0
		}
		return m
	}
	if !pp.pickDense(t, r, views, &sel, held) {
		for id, m := range pp.matched {
			if m == 0 || id >= len(pp.pos) || pp.pos[id] < 0 {
				continue
			}
			i := int(pp.pos[id])
			if held(i) == 0 {
				continue
			}
			isFree := views[i].Free()
			if sel.see(m, isFree) {
				sel.offer(prefixCand{pos: i, m: m, t: t.timeOf(r.Session, i)}, isFree)
			}
		}
	}
	cand := sel.sorted()
	pp.cand = cand
	if len(cand) == 0 {
		return pp.pw.pickTree(t, now, r, views)
	}
	top, free, freeAt := cand[0].pos, sel.free.pos, -1
	if free >= 0 { // its rank: in the band kept, or past it
		freeAt = len(cand)
		for k, c := range cand {
			if c.pos == free {
				freeAt = k
				break
			}
		}
	}
	if free == top {
		return dispatch(top)
	}
	var tf float64
	if free < 0 {
		free, tf = t.bestFree(r.Session)
	}
	return bandDecide(pp.p, now, r, views, top, free, func(limit int) int {
		if freeAt >= 0 {
			return min(freeAt, limit)
		}
		if sel.n >= limit {
			return limit
		}
		// The candidates rank before the free backend; skip them in the
		// tree's order.
		for _, c := range cand {
			t.ex = append(t.ex, c.pos)
		}
		return len(cand) + t.countBefore(r.Session, tf, limit-len(cand))
	})
}

// prefixDense is how dense a level of holders (those holding the same
// number of blocks) must be among the eligible backends (1 in prefixDense
// at least) for pickDense to find the first of them by walking the tree's
// ranking (about prefixDense backends a holder taken) rather than timing
// every one of them (a descent of the tree each).
const prefixDense = 8

// pickDense fills sel when the band's worth of holders ends in a level
// dense among the eligible backends (a prefix most backends hold, such as
// a shared system prompt): the holders of more blocks (fewer than the
// band's width) are timed, and the rest of the band are the first of that
// level in the tree's ranking, found by walking it; the best free holder
// is the first free one of the most blocks any free holder holds, found
// the same way when that level is dense among the free backends. It
// reports false, leaving sel untouched, otherwise.
func (pp *Prefix) pickDense(t *rankTree, r *Request, views []View, sel *prefixBest, held func(int) int32) bool {
	nb := len(r.Blocks)
	pp.level = resize(pp.level, nb+1)
	clear(pp.level)
	var topFree int32
	n, nFree := 0, 0
	pp.held = resize(pp.held, len(pp.ids))
	for i := range pp.ids {
		m := held(i)
		pp.held[i] = m
		if m == 0 {
			continue
		}
		if int(m) > nb {
			return false
		}
		n++
		pp.level[m]++
		if views[i].Free() {
			switch {
			case m > topFree:
				topFree, nFree = m, 1
			case m == topFree:
				nFree++
			}
		}
	}
	// The boundary level: the holders of more blocks are fewer than k,
	// with it they are k or more.
	above, edge := 0, int32(-1)
	for m := nb; m > 0; m-- {
		if above+pp.level[m] >= sel.k {
			edge = int32(m)
			break
		}
		above += pp.level[m]
	}
	if edge < 0 || pp.level[edge]*prefixDense < int(t.elig[0]) {
		return false
	}
	sel.n = n
	for i := range pp.ids {
		if m := pp.held[i]; m > edge {
			sel.heap = append(sel.heap, prefixCand{pos: i, m: m, t: t.timeOf(r.Session, i)})
		}
	}
	t.restart()
	for len(sel.heap) < sel.k {
		b, tb := t.next(r.Session, false, math.Inf(1))
		if b < 0 {
			break
		}
		if pp.held[b] == edge {
			sel.heap = append(sel.heap, prefixCand{pos: b, m: edge, t: tb})
		}
	}
	switch {
	case nFree == 0:
	case topFree > edge: // timed above
		for _, c := range sel.heap {
			if c.m == topFree && views[c.pos].Free() && (sel.free.pos < 0 || c.ranksBefore(sel.free)) {
				sel.free = c
			}
		}
	case nFree*prefixDense >= int(t.free[0]):
		t.restart()
		for {
			b, tb := t.next(r.Session, true, math.Inf(1))
			if b < 0 {
				break
			}
			if pp.held[b] == topFree {
				sel.free = prefixCand{pos: b, m: topFree, t: tb}
				break
			}
		}
	default:
		for i := range pp.ids {
			if pp.held[i] == topFree && views[i].Free() {
				c := prefixCand{pos: i, m: topFree, t: t.timeOf(r.Session, i)}
				if sel.free.pos < 0 || c.ranksBefore(sel.free) {
					sel.free = c
				}
			}
		}
	}
	return true
}

// prefixBest keeps, of the prefix holders offered for a pick over the rank
// tree, the k that rank first (by blocks held, then time, then position)
// and the best-ranked free one, without sorting them all: heap holds the k
// best so far, the worst of them at its root.
type prefixBest struct {
	k    int
	heap []prefixCand
	free prefixCand // pos -1: none
	n    int        // the holders seen
}

// reset empties b to keep the k best (at least 1), reusing heap's array.
func (b *prefixBest) reset(k int, heap []prefixCand) {
	b.k, b.heap, b.free, b.n = max(k, 1), heap[:0], prefixCand{pos: -1}, 0
}

// see counts a holder of m blocks and reports whether it could be kept,
// that is whether its time is needed: not if it holds fewer blocks than
// the worst of a full heap and, free, than the best free one so far.
func (b *prefixBest) see(m int32, isFree bool) bool {
	b.n++
	if len(b.heap) < b.k || m >= b.heap[0].m {
		return true
	}
	return isFree && (b.free.pos < 0 || m >= b.free.m)
}

// offer keeps c if it ranks among the k best so far, or as the best free.
func (b *prefixBest) offer(c prefixCand, isFree bool) {
	if isFree && (b.free.pos < 0 || c.ranksBefore(b.free)) {
		b.free = c
	}
	b.heap = keepBest(b.heap, b.k, c, prefixCand.ranksBefore)
}

// sorted is the kept holders, best first.
func (b *prefixBest) sorted() []prefixCand {
	slices.SortFunc(b.heap, func(x, y prefixCand) int {
		if x.ranksBefore(y) {
			return -1
		}
		if y.ranksBefore(x) {
			return 1
		}
		return 0
	})
	return b.heap
}

// ranksBefore orders holders: more blocks first, then the earlier time in
// the tree's race, then the lower position.
func (a prefixCand) ranksBefore(b prefixCand) bool {
	if a.m != b.m {
		return a.m > b.m
	}
	if a.t != b.t {
		return a.t < b.t
	}
	return a.pos < b.pos
}

// score is backend v's rank score for r holding m blocks of its prefix.
func (pp *Prefix) score(r *Request, v *View, m float64, measured bool) float64 {
	return m + squash(-weightOf(v, measured)/math.Log(unit(mix(r.Session^v.Key))))
}

// squash maps a rendezvous score (0,+Inf) onto (0,1), keeping its order.
func squash(s float64) float64 { return s / (1 + s) }
