package policy

import (
	"math"
	"slices"
)

// rankFlatMax is the largest fleet pulsar-waw ranks flat, scoring every
// backend (about 5 ns each, BenchmarkPick); a larger fleet is ranked by a
// rankTree, whose pick costs about the same at 1,000 and at 10,000
// backends. The routing study's fleets (20 backends; 200 copied ten times)
// stay below it, so their results are those of flat rendezvous to the digit.
// The switch has no hysteresis: it depends only on the number of backends,
// so every router replica ranks alike whatever its history, and a fleet
// whose size flaps across it reshuffles its sessions at each crossing.
const rankFlatMax = 256

// The rank tree's shape: each level splits a node by the next rankBits bits
// of its backends' keys, down to the buckets at rankLevels.
const (
	rankBits = 2
	rankFan  = 1 << rankBits
	// rankMinWeight is the least weight an eligible backend counts with in
	// the tree (its time must stay finite).
	rankMinWeight = 1e-6
)

// rankTree is weighted rendezvous over a trie of the backends' keys: the
// root splits the fleet by the top rankBits bits of each backend's Key, its
// children by the next ones, down to the buckets at the fixed depth
// rankLevels (whatever the fleet's size). A node's weight is the sum of its eligible backends' weights
// (each at least rankMinWeight).
//
// A session ranks the backends as an exponential race: backend b finishes
// at time E_b/w_b in flat rendezvous (E_b = -ln u(s,b), an exponential of
// rate 1), and ranks by finishing order. The tree draws the race top-down
// instead: a node's first finisher finishes at the node's time T (the
// root's is 0); its children run a weighted rendezvous among themselves,
// X_c = -ln u(s,c)/W_c, the winner (least X) inherits T and every other
// child c starts its own race at T + X_c - min X. By the exponential's lack
// of memory this is the same law as the flat race: the first backend is b
// with probability w_b/W, and every later rank too is drawn as flat
// rendezvous draws it. It is not the same draw: which backend a session gets
// differs from flat rendezvous, so the tree is used only above rankFlatMax.
//
// A backend's time is a sum of hashed terms along its path, and a node's
// time bounds its backends' from below, so the backends can be enumerated
// in rank order with a heap of nodes without scoring the others: the top
// backend costs one rendezvous per level (rankFan children, then a
// bucket), and each later rank about as much again. Free slots are counted
// per node, so the best-ranked free backend is found without visiting full
// subtrees; counting the backends ranked before a time need not descend a
// node whose own time is before it (it holds at least one).
//
// Changing a backend's weight changes its ancestors' weights only, so a
// session moves only where one of those nodes' rendezvous changes its
// winner: to or from the changed backend's subtree (minimal disruption at
// each level; a session drawn into the subtree lands on whichever of its
// backends ranks first). Nodes are named by key prefix, not by position, so
// a backend joining or leaving changes only its own ancestors' weights, and
// a deeper tree (a larger fleet) splits buckets without renaming the nodes
// above them.
//
// A rankTree is kept current by Touched (see Tracker); it is deterministic:
// its weights are sums recomputed from their members, never running
// totals, so the same views give the same tree whatever their history.
type rankTree struct {
	n      int
	useTPS bool
	// Per node, level by level (the layout of rankOff; node p's children
	// are p*rankFan...).
	wsum []float64 // weight of the eligible members
	elig []int32   // eligible members
	free []int32   // eligible members with a free slot
	// Buckets: the positions of bucket k are mem[start[k]:start[k+1]],
	// in increasing order.
	start []int32
	mem   []int32
	// Per backend, by position.
	back []rankBackend
	// unmeasured counts the eligible backends without a measured input TPS;
	// measured is whether the weights are the measured ones (useTPS and
	// unmeasured == 0).
	unmeasured int
	measured   bool
	// The eligible backends' outstanding requests and capacities (at least
	// 1 each), in all (each backend's: rankBackend).
	sumOut, sumCap int
	// ext, if set, holds the weights by position that the tree's owner
	// keeps (pressure's placement weights) instead of the views' capacity
	// or measured TPS; setWeight changes one.
	ext []float64
	// Scratch, reused across picks.
	heap  []rankItem
	arena []rankItem
	ex    []int
	buf   []rankItem
	cur   []int32
	kids  [rankFan]int32
}

// rankBackend is what the rank tree keeps of one backend. A stats message
// reads and writes all of it (touched) and a pick reads its key and
// weight: in one struct of one 64-byte cache line, that is one miss per
// backend at thousands of backends, where separate arrays by position cost
// one each (TestRankBackendIsOneCacheLine).
type rankBackend struct {
	key uint64
	w   float64 // its weight if eligible, else 0
	// Its outstanding requests and capacity (at least 1) if it is
	// eligible, else 0 (see rankTree.sumOut).
	out, capa              int
	bucket                 int32
	isElig, isFree, hasTPS bool
	_                      [25]byte // to 64 bytes
}

// rankItem is a node (or, if leaf, a backend's position) and its time, or
// (!exact) a lower bound on it; then its time is T + (x - lo), x its
// rendezvous term.
type rankItem struct {
	t, T, lo float64
	id       int32
	// next is the sibling after it in key order (an index in the arena of
	// rankTree.next), -1 for none.
	next  int32
	leaf  bool
	exact bool
}

// before orders items by time; at equal times bounds come first (they may
// turn out equal), then nodes (a node's time bounds its backends'), then
// backends by position.
func (a rankItem) before(b rankItem) bool {
	if a.t != b.t {
		return a.t < b.t
	}
	if a.exact != b.exact {
		return !a.exact
	}
	if a.leaf != b.leaf {
		return !a.leaf
	}
	return a.id < b.id
}

// rankLevels is the depth of the buckets, the same for every fleet the
// tree ranks: 4^6 = 4,096 buckets, about 8 backends each at 32,768
// backends; past that the buckets grow instead. A depth that rose with the
// fleet would split every bucket and redraw the races in it each time the
// fleet crossed a threshold, moving most sessions when one backend joins
// (about 65% at 2,048 -> 2,049 backends); with a fixed depth a backend
// joining or leaving changes only its own ancestors' weights at any size
// (TestRankTreeJoinLeave).
const rankLevels = 6

// nodeKey is the rendezvous key of the node at level l with key prefix p.
func nodeKey(l int, p uint64) uint64 { return mix(uint64(l)<<58 ^ p ^ 0x7a3c_5e1d_b6f0_4a29) }

// The nodes of every rank tree, the same whatever the fleet (the depth is
// fixed): level l (the root 0, the buckets rankLevels) starts at node
// rankOff[l] and holds rankFan^l nodes, rankNodes in all; rankNodeKey[i]
// is node i's rendezvous key.
var rankOff, rankNodes, rankNodeKey = rankLayout()

func rankLayout() (off [rankLevels + 1]int, total int, keys []uint64) {
	nodes := 1
	for l := 0; l <= rankLevels; l++ {
		off[l] = total
		total += nodes
		nodes *= rankFan
	}
	keys = make([]uint64, total)
	for l := 0; l <= rankLevels; l++ {
		end := total
		if l < rankLevels {
			end = off[l+1]
		}
		for i := off[l]; i < end; i++ {
			keys[i] = nodeKey(l, uint64(i-off[l]))
		}
	}
	return off, total, keys
}

// build (re)makes t over views, reusing its arrays; useTPS: the weights are
// measured input TPS once every eligible backend has one.
func (t *rankTree) build(views []View, useTPS bool) {
	n := len(views)
	t.n, t.useTPS = n, useTPS
	buckets := rankNodes - rankOff[rankLevels]
	t.wsum = resize(t.wsum, rankNodes)
	t.elig = resize(t.elig, rankNodes)
	t.free = resize(t.free, rankNodes)
	t.start = resize(t.start, buckets+1)
	clear(t.start)
	t.mem = resize(t.mem, n)
	t.back = resize(t.back, n)
	t.sumOut, t.sumCap = 0, 0
	shift := 64 - rankBits*rankLevels
	t.unmeasured = 0
	for i := range views {
		v := &views[i]
		t.back[i].key = v.Key
		t.back[i].bucket = int32(v.Key >> shift)
		t.start[t.back[i].bucket+1]++
		t.back[i].isElig, t.back[i].isFree, t.back[i].hasTPS = v.Eligible, v.Eligible && v.Free(), v.MaxInputTPS > 0
		if v.Eligible && !t.back[i].hasTPS {
			t.unmeasured++
		}
		t.setLoad(i, v)
	}
	for k := range buckets {
		t.start[k+1] += t.start[k]
	}
	t.cur = resize(t.cur, buckets)
	copy(t.cur, t.start)
	for i := range views { // in increasing position within each bucket
		k := t.back[i].bucket
		t.mem[t.cur[k]] = int32(i)
		t.cur[k]++
	}
	t.measured = t.useTPS && t.unmeasured == 0
	for i := range views {
		t.back[i].w = t.weight(&views[i], i)
	}
	t.sumAll()
}

// resize returns s with length n, reusing its array when it is large enough.
func resize[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// weight is v's weight in the tree (v is at position i): 0 if it is not
// eligible.
func (t *rankTree) weight(v *View, i int) float64 {
	if !v.Eligible {
		return 0
	}
	if t.ext != nil {
		return max(t.ext[i], rankMinWeight)
	}
	return max(weightOf(v, t.measured), rankMinWeight)
}

// setWeight sets the owner's weight of backend i (see ext) and updates its
// ancestors; views[i] is the backend's view.
func (t *rankTree) setWeight(views []View, i int, w float64) {
	t.ext[i] = w
	if nw := t.weight(&views[i], i); nw != t.back[i].w {
		t.back[i].w = nw
		t.resum(i)
	}
}

// sumAll recomputes every node's sums from the backends.
func (t *rankTree) sumAll() {
	bl := rankOff[rankLevels]
	for k := range len(t.start) - 1 {
		t.sumBucket(bl + k)
	}
	for l := rankLevels - 1; l >= 0; l-- {
		for i := rankOff[l]; i < rankOff[l+1]; i++ {
			t.sumNode(l, i)
		}
	}
}

// sumBucket recomputes bucket node i's sums from its members.
func (t *rankTree) sumBucket(i int) {
	k := i - rankOff[rankLevels]
	var w float64
	var e, f int32
	for _, m := range t.mem[t.start[k]:t.start[k+1]] {
		w += t.back[m].w
		if t.back[m].isElig {
			e++
		}
		if t.back[m].isFree {
			f++
		}
	}
	t.wsum[i], t.elig[i], t.free[i] = w, e, f
}

// sumNode recomputes node i (of level l, above the buckets) from its
// children.
func (t *rankTree) sumNode(l, i int) {
	c := rankOff[l+1] + (i-rankOff[l])*rankFan
	var w float64
	var e, f int32
	for j := c; j < c+rankFan; j++ {
		w += t.wsum[j]
		e += t.elig[j]
		f += t.free[j]
	}
	t.wsum[i], t.elig[i], t.free[i] = w, e, f
}

// prefetch reads backend i's entry (see Tracker.Prefetch).
func (t *rankTree) prefetch(i int) uint64 {
	if t == nil || i < 0 || i >= len(t.back) {
		return 0
	}
	return t.back[i].key
}

// touched updates backend i from views[i].
func (t *rankTree) touched(views []View, i int) {
	v := &views[i]
	if v.Key != t.back[i].key { // not our views: start again
		t.build(views, t.useTPS)
		return
	}
	wasUnmeasured := t.back[i].isElig && !t.back[i].hasTPS
	wasElig, wasFree := t.back[i].isElig, t.back[i].isFree
	t.back[i].isElig, t.back[i].isFree, t.back[i].hasTPS = v.Eligible, v.Eligible && v.Free(), v.MaxInputTPS > 0
	t.sumOut -= t.back[i].out
	t.sumCap -= t.back[i].capa
	t.setLoad(i, v)
	if isUnmeasured := t.back[i].isElig && !t.back[i].hasTPS; isUnmeasured != wasUnmeasured {
		if isUnmeasured {
			t.unmeasured++
		} else {
			t.unmeasured--
		}
	}
	if m := t.useTPS && t.unmeasured == 0; m != t.measured { // every weight changes
		t.measured = m
		for j := range views {
			t.back[j].w = t.weight(&views[j], j)
		}
		t.sumAll()
		return
	}
	nw := t.weight(v, i)
	if nw == t.back[i].w && wasElig == t.back[i].isElig && wasFree == t.back[i].isFree {
		// Nothing the nodes sum changed (most stats messages at a steady
		// load): the ancestors, recomputed from the same members, would
		// come out the same.
		return
	}
	t.back[i].w = nw
	t.resum(i)
}

// resum recomputes the sums of backend i's ancestors.
func (t *rankTree) resum(i int) {
	node := rankOff[rankLevels] + int(t.back[i].bucket)
	t.sumBucket(node)
	for l := rankLevels - 1; l >= 0; l-- {
		node = rankOff[l] + (node-rankOff[l+1])/rankFan
		t.sumNode(l, node)
	}
}

// setLoad records backend i's outstanding requests and capacity (v's if
// it is eligible, else 0) and adds them to the sums.
func (t *rankTree) setLoad(i int, v *View) {
	t.back[i].out, t.back[i].capa = 0, 0
	if v.Eligible {
		t.back[i].out, t.back[i].capa = v.Outstanding(), max(v.Capacity, 1)
	}
	t.sumOut += t.back[i].out
	t.sumCap += t.back[i].capa
}

// timeOf is backend i's time in the session's race (see rankTree): the
// sum, along its path, of how far its ancestor (and it) lost each
// rendezvous by. i must be eligible.
func (t *rankTree) timeOf(session uint64, i int) float64 {
	var T float64
	shift := 64 - rankBits*rankLevels
	node := 0
	for l := 0; l <= rankLevels; l++ {
		var want int32
		if l == rankLevels {
			want = int32(i)
		} else {
			want = int32(rankOff[l+1] + int(t.back[i].key>>shift>>(rankBits*(rankLevels-l-1))))
		}
		out, _ := t.children(session, l, node, T, false)
		for _, c := range out {
			if c.id == want {
				T = t.exactTime(session, c)
				break
			}
		}
		node = int(want)
	}
	return T
}

// exclusions sets t.ex to r's excluded positions that are eligible (sorted,
// without repeats) and reports whether some eligible backend is not
// excluded (eligible's strict mode); when it is not, t.ex is emptied, as
// the exclusions then do not count.
func (t *rankTree) exclusions(r *Request) bool {
	ex := t.ex[:0]
	for _, x := range r.Exclude {
		if x >= 0 && x < t.n && t.back[x].isElig {
			ex = append(ex, x)
		}
	}
	slices.Sort(ex)
	ex = slices.Compact(ex)
	strict := int(t.elig[0]) > len(ex)
	if !strict {
		ex = ex[:0]
	}
	t.ex = ex
	return strict
}

// excluded reports whether position i is in t.ex.
func (t *rankTree) excluded(i int32) bool {
	for _, x := range t.ex {
		if x == int(i) {
			return true
		}
	}
	return false
}

// hashTime is the rendezvous term of a key of weight w for a session.
func hashTime(session, key uint64, w float64) float64 {
	return -math.Log(unit(mix(session^key))) / w
}

// lowSlack lowers the cheap bound on -ln(u) (see hashLow) far below the
// rounding error of either expression, so that it never exceeds the
// logarithm as computed.
const lowSlack = 1 - 1e-9

// hashLow bounds hashTime from below without a logarithm: with v = 1-u,
// -ln(u) = v + v^2/2 + v^3/3 + ... >= v + v^2/2 + v^3/3.
func hashLow(session, key uint64, w float64) float64 {
	v := 1 - unit(mix(session^key))
	return v * (1 + v*(0.5+v/3)) * lowSlack / w
}

// childKey is child c's rendezvous key and weight (a node, or a backend's
// position if leaf).
func (t *rankTree) childKey(c int32, leaf bool) (uint64, float64) {
	if leaf {
		return t.back[c].key, t.back[c].w
	}
	return rankNodeKey[c], t.wsum[c]
}

// exactTime is item c's time (see rankTree), computing its logarithm if
// it was only bounded.
func (t *rankTree) exactTime(session uint64, c rankItem) float64 {
	if c.exact {
		return c.t
	}
	k, w := t.childKey(c.id, c.leaf)
	return c.T + (hashTime(session, k, w) - c.lo)
}

// children sets t.buf to the eligible children of node i (level l), a
// node of time T, each with its time, or a lower bound on it where the
// logarithm was not needed to find the winner (the least rendezvous term,
// whose time is T); with freeOnly, only those holding a free backend. It
// returns t.buf and the winner's index in it (-1 if the winner holds no
// free backend under freeOnly).
func (t *rankTree) children(session uint64, l, i int, T float64, freeOnly bool) ([]rankItem, int) {
	out := t.buf[:0]
	lo, win, winFree := math.Inf(1), int32(-1), false
	leaf := l == rankLevels
	var ids []int32
	if leaf {
		k := i - rankOff[l]
		ids = t.mem[t.start[k]:t.start[k+1]]
	} else {
		ids = t.kids[:rankFan]
		c := int32(rankOff[l+1] + (i-rankOff[l])*rankFan)
		for j := range ids {
			ids[j] = c + int32(j)
		}
	}
	for _, id := range ids {
		var key uint64
		var w float64
		var hasFree bool
		if leaf {
			key, w, hasFree = t.back[id].key, t.back[id].w, t.back[id].isFree
		} else {
			key, w, hasFree = rankNodeKey[id], t.wsum[id], t.free[id] > 0
		}
		if w == 0 {
			continue
		}
		x, exact := hashLow(session, key, w), false
		if x < lo || (x == lo && id < win) {
			x, exact = hashTime(session, key, w), true
			if x < lo || (x == lo && id < win) {
				lo, win, winFree = x, id, hasFree
			}
		}
		if !freeOnly || hasFree {
			out = append(out, rankItem{t: x, id: id, leaf: leaf, exact: exact})
		}
	}
	at := -1
	for k := range out {
		it := &out[k]
		if it.id == win {
			it.t, it.exact, at = T, true, k
			continue
		}
		it.T, it.lo = T, lo
		it.t = T + (it.t - lo)
	}
	t.buf = out
	if freeOnly && !winFree {
		at = -1
	}
	return out, at
}

// levelOf is the level of node i.
func (t *rankTree) levelOf(i int) int {
	l := rankLevels
	for i < rankOff[l] {
		l--
	}
	return l
}

// winner is the child of node i (level l) with the least rendezvous term
// (ties to the lowest id), with the logarithm computed only for the
// children whose bound can beat the best so far; -1 if none is eligible.
func (t *rankTree) winner(session uint64, l, i int) int32 {
	lo, win := math.Inf(1), int32(-1)
	if l == rankLevels {
		k := i - rankOff[l]
		for _, m := range t.mem[t.start[k]:t.start[k+1]] {
			w := t.back[m].w
			if w == 0 || hashLow(session, t.back[m].key, w) > lo {
				continue
			}
			if x := hashTime(session, t.back[m].key, w); x < lo || (x == lo && m < win) {
				lo, win = x, m
			}
		}
		return win
	}
	c := rankOff[l+1] + (i-rankOff[l])*rankFan
	for j := int32(c); j < int32(c+rankFan); j++ {
		if t.elig[j] == 0 {
			continue
		}
		w := t.wsum[j]
		if hashLow(session, rankNodeKey[j], w) > lo {
			continue
		}
		if x := hashTime(session, rankNodeKey[j], w); x < lo || (x == lo && j < win) {
			lo, win = x, j
		}
	}
	return win
}

// top is the session's top-ranked backend, skipping t.ex, and its time;
// -1 if no backend is eligible. The winner at each level inherits its
// parent's time, so without exclusions this is one descent.
func (t *rankTree) top(session uint64) (int, float64) {
	if t.elig[0] == 0 {
		return -1, 0
	}
	i := 0
	for l := 0; l < rankLevels; l++ {
		i = int(t.winner(session, l, i))
	}
	if b := t.winner(session, rankLevels, i); !t.excluded(b) {
		return int(b), 0
	}
	t.restart()
	return t.next(session, false, math.Inf(1))
}

// bestFree is the session's best-ranked backend with a free slot, skipping
// t.ex, and its time; -1 if none.
func (t *rankTree) bestFree(session uint64) (int, float64) {
	if t.free[0] == 0 {
		return -1, 0
	}
	t.restart()
	return t.next(session, true, math.Inf(1))
}

// restart empties the heap and puts the root in it.
func (t *rankTree) restart() {
	t.heap, t.arena = t.heap[:0], t.arena[:0]
	t.push(rankItem{id: 0, next: -1, exact: true})
}

// next pops the heap in time order, expanding nodes (with freeOnly, only
// those holding a free backend), until a backend not in t.ex comes out;
// it returns it and its time, or -1 once the heap is empty or its first
// item's time is not below stop (nothing it holds ranks before stop).
//
// The heap holds, of each expanded node's children, only the first not yet
// taken in the order of their keys (the children are sorted once into the
// arena, each linked to the next): taking one puts the next in, so a pick
// pushes about two items per item it takes, not every child.
func (t *rankTree) next(session uint64, freeOnly bool, stop float64) (int, float64) {
	for len(t.heap) > 0 {
		if t.heap[0].t >= stop {
			return -1, 0
		}
		it := t.pop()
		if it.next >= 0 {
			t.push(t.arena[it.next])
			it.next = -1
		}
		if !it.exact {
			it.t, it.exact = t.exactTime(session, it), true
			t.push(it)
			continue
		}
		if it.leaf {
			if t.excluded(it.id) {
				continue
			}
			return int(it.id), it.t
		}
		out, _ := t.children(session, t.levelOf(int(it.id)), int(it.id), it.t, freeOnly)
		n := 0
		for _, c := range out { // drop what cannot come out; insertion sort the rest
			if c.t >= stop {
				continue
			}
			k := n
			for ; k > 0 && c.before(out[k-1]); k-- {
				out[k] = out[k-1]
			}
			out[k] = c
			n++
		}
		if n == 0 {
			continue
		}
		base := int32(len(t.arena))
		for k := range n {
			out[k].next = -1
			if k+1 < n {
				out[k].next = base + int32(k) + 1
			}
		}
		t.arena = append(t.arena, out[:n]...)
		t.push(t.arena[base])
	}
	return -1, 0
}

// countBefore counts the backends not in t.ex ranked strictly before time
// tf, stopping at limit. It need not reach them: a node whose time is
// before tf holds at least one backend before tf (its first), so it counts
// one without being expanded, unless it holds an excluded backend; a node
// is expanded (its count replaced by its children's) only while the count
// is below limit.
func (t *rankTree) countBefore(session uint64, tf float64, limit int) int {
	if tf <= 0 {
		return 0
	}
	stack := append(t.heap[:0], rankItem{id: 0, exact: true})
	known := 0
	if !t.holdsExcluded(0, 0) {
		known = 1
	}
	for len(stack) > 0 && known < limit {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		l := t.levelOf(int(it.id))
		if !t.holdsExcluded(l, int(it.id)) {
			known-- // replaced by its children's count
		}
		out, _ := t.children(session, l, int(it.id), it.t, false)
		for _, c := range out {
			if c.t >= tf {
				continue // a lower bound: nothing in it ranks before tf
			}
			if !c.exact {
				if c.t = t.exactTime(session, c); c.t >= tf {
					continue
				}
				c.exact = true
			}
			switch {
			case c.leaf:
				if !t.excluded(c.id) {
					known++
				}
			case t.holdsExcluded(l+1, int(c.id)):
				stack = append(stack, c)
			default:
				known++
				stack = append(stack, c)
			}
		}
	}
	t.heap = stack[:0]
	return min(known, limit)
}

// holdsExcluded reports whether node i (of level l) holds a backend in t.ex.
func (t *rankTree) holdsExcluded(l, i int) bool {
	if len(t.ex) == 0 {
		return false
	}
	if l == 0 {
		return true
	}
	shift := 64 - rankBits*l
	for _, x := range t.ex {
		if int(t.back[x].key>>shift) == i-rankOff[l] {
			return true
		}
	}
	return false
}

// band appends to out the session's k top-ranked backends not in t.ex and
// those tied with the k-th.
func (t *rankTree) band(session uint64, k int, out []int) []int {
	t.restart()
	stop := math.Inf(1) // once the k-th is out: just above its time
	for n := 0; ; n++ {
		b, tb := t.next(session, false, stop)
		if b < 0 {
			return out
		}
		out = append(out, b)
		if n == k-1 {
			stop = math.Nextafter(tb, math.Inf(1))
		}
	}
}

// push adds it to the heap.
func (t *rankTree) push(it rankItem) {
	t.heap = append(t.heap, it)
	heapUp(t.heap, len(t.heap)-1, rankItem.before)
}

// pop removes the heap's first item.
func (t *rankTree) pop() rankItem {
	h := t.heap
	it := h[0]
	last := len(h) - 1
	h[0] = h[last]
	t.heap = h[:last]
	heapDown(t.heap, 0, rankItem.before)
	return it
}
