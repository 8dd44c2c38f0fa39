package policy

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/stargate-llm/stargate/internal/cputime"
)

// refTimes is every backend's time in the session's race over t (NaN for
// the ineligible), by the definition in rankTree's documentation: each
// node's children run a weighted rendezvous, and child c's time is its
// parent's plus its term less the least term; every term is computed.
func refTimes(t *rankTree, session uint64) []float64 {
	times := make([]float64, t.n)
	for i := range times {
		times[i] = math.NaN()
	}
	var walk func(l, i int, T float64)
	walk = func(l, i int, T float64) {
		type child struct {
			id int
			x  float64
		}
		var kids []child
		if l == rankLevels {
			k := i - rankOff[l]
			for _, m := range t.mem[t.start[k]:t.start[k+1]] {
				if t.back[m].isElig {
					kids = append(kids, child{int(m), hashTime(session, t.back[m].key, t.back[m].w)})
				}
			}
		} else {
			c := rankOff[l+1] + (i-rankOff[l])*rankFan
			for j := c; j < c+rankFan; j++ {
				if t.elig[j] > 0 {
					kids = append(kids, child{j, hashTime(session, rankNodeKey[j], t.wsum[j])})
				}
			}
		}
		lo := math.Inf(1)
		for _, k := range kids {
			lo = min(lo, k.x)
		}
		for _, k := range kids {
			if l == rankLevels {
				times[k.id] = T + (k.x - lo)
			} else {
				walk(l+1, k.id, T+(k.x-lo))
			}
		}
	}
	if t.elig[0] > 0 {
		walk(0, 0, 0)
	}
	return times
}

// refOrder is the session's ranking of the backends eligible for r (as
// eligible decides, exclusions included), by a tree built afresh from
// views: ascending time, ties to the lowest position.
func refOrder(views []View, useTPS bool, r *Request) ([]int, []float64) {
	var t rankTree
	t.build(views, useTPS)
	return treeOrder(&t, views, r)
}

// treeOrder is the session's ranking, by t, of the backends eligible for
// r: ascending time, ties to the lowest position; and every backend's time.
func treeOrder(t *rankTree, views []View, r *Request) ([]int, []float64) {
	times := refTimes(t, r.Session)
	strict := anyEligible(r, views)
	var order []int
	for i := range views {
		if eligible(r, &views[i], strict) {
			order = append(order, i)
		}
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmp.Compare(times[a], times[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return order, times
}

// rankScores turns a ranking into scores for bandPick: the first ranked
// scores highest, the others -Inf.
func rankScores(n int, order []int) []float64 {
	scores := make([]float64, n)
	for i := range scores {
		scores[i] = math.Inf(-1)
	}
	for k, i := range order {
		scores[i] = -float64(k)
	}
	return scores
}

// refTreePulsar is pulsar-waw's pick over the rank tree's ranking, by its
// definition: every backend's time, sorted, then the band.
func refTreePulsar(p Params, now time.Duration, r *Request, views []View) Decision {
	order, _ := refOrder(views, p.Weight != WeightCapacity, r)
	return bandPick(p, now, r, views, rankScores(len(views), order))
}

// mutate changes a few random backends as a router's stats would, telling
// the tracker.
func mutate(rng *rand.Rand, tr Tracker, views []View) {
	for range 1 + rng.IntN(6) {
		i := rng.IntN(len(views))
		v := &views[i]
		switch rng.IntN(6) {
		case 0:
			v.Eligible = !v.Eligible
		case 1:
			v.Capacity = 1 + rng.IntN(500)
		case 2:
			v.MaxInputTPS = float64(rng.IntN(3)) * float64(rng.IntN(40000))
		default:
			v.Active, v.Pending, v.Waiting = rng.IntN(v.Capacity+2), rng.IntN(3), rng.IntN(4)
		}
		tr.Touched(views, i)
	}
}

// sameTree reports how got (kept current by touched) differs from a tree
// built afresh from views, "" if in nothing.
func sameTree(got *rankTree, views []View) string {
	var want rankTree
	want.build(views, got.useTPS)
	switch {
	case got.measured != want.measured || got.unmeasured != want.unmeasured:
		return fmt.Sprintf("measured %v/%d, afresh %v/%d", got.measured, got.unmeasured, want.measured, want.unmeasured)
	case got.sumOut != want.sumOut || got.sumCap != want.sumCap:
		return fmt.Sprintf("sums %d/%d, afresh %d/%d", got.sumOut, got.sumCap, want.sumOut, want.sumCap)
	case !slices.Equal(got.wsum, want.wsum):
		return "node weights differ"
	case !slices.Equal(got.elig, want.elig) || !slices.Equal(got.free, want.free):
		return "node counts differ"
	case !slices.Equal(rankWeights(got), rankWeights(&want)) || !slices.Equal(got.mem, want.mem):
		return "backends differ"
	}
	return ""
}

// rankWeights is each backend's weight in t, by position.
func rankWeights(t *rankTree) []float64 {
	w := make([]float64, len(t.back))
	for i := range t.back {
		w[i] = t.back[i].w
	}
	return w
}

// TestRankTreeExact: above rankFlatMax, pulsar-waw's pick and Watch over
// the tree the router keeps current decide exactly as ranking every
// backend by its time (refTimes) does, over random fleets of 257 to 3,000
// backends changing between picks, both weight sources, waits across the
// band, exclusions (all of them too) and queues; the tree kept current
// equals one built afresh.
func TestRankTreeExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 7))
	for trial := range 100 {
		n := rankFlatMax + 1 + rng.IntN(400)
		if trial%10 == 0 {
			n = rankFlatMax + 1 + rng.IntN(2000)
		}
		views := randomViews(rng, n)
		p := DefaultParams()
		if trial%2 == 1 {
			p.Weight = WeightMaxInputTPS
		}
		if trial%4 == 1 { // every backend measured
			for i := range views {
				views[i].MaxInputTPS = 1 + float64(rng.IntN(40000))
			}
		}
		if trial%6 == 0 { // a fleet mostly full: long bands and overflows
			for i := range views {
				views[i].Active = views[i].Capacity
			}
		}
		pw := NewPulsarWaW(p, nil)
		pw.Track(views)
		if pw.tree == nil {
			t.Fatalf("%d backends: not tracked by a rank tree", n)
		}
		for k := range 30 {
			if k%5 == 4 {
				mutate(rng, pw, views)
				if diff := sameTree(pw.tree, views); diff != "" {
					t.Fatalf("trial %d: after changes, the tree kept current differs from one built afresh: %s", trial, diff)
				}
			}
			r := &Request{Session: rng.Uint64(), QueuedAt: -1}
			if k%3 == 0 {
				r.QueuedAt = rng.IntN(n)
			}
			switch k % 7 {
			case 0:
				r.Exclude = []int{rng.IntN(n), rng.IntN(n), rng.IntN(n)}
			case 1: // the top-ranked backends refused
				order, _ := refOrder(views, p.Weight != WeightCapacity, r)
				r.Exclude = append(r.Exclude, order[:min(2, len(order))]...)
			case 2: // every backend refused: the exclusions do not count
				for i := range n {
					r.Exclude = append(r.Exclude, i)
				}
			}
			now := time.Duration(rng.Int64N(int64(5 * time.Second)))
			got, want := pw.Pick(now, r, views), refTreePulsar(p, now, r, views)
			if got != want {
				t.Fatalf("trial %d pick %d (%d backends, weight %s, waited %v, excluded %d): tree %+v, reference %+v", trial, k, n, p.Weight, now, len(r.Exclude), got, want)
			}
			if got.Kind != Wait {
				continue
			}
			watch, _ := pw.Watch(now, r, views, got, nil)
			band := 1 + int(now/p.BandStep)
			order, times := refOrder(views, p.Weight != WeightCapacity, r)
			wantWatch := order[:min(band, len(order))]
			for _, i := range order[len(wantWatch):] {
				if times[i] == times[wantWatch[len(wantWatch)-1]] {
					wantWatch = append(wantWatch, i)
				}
			}
			if !slices.Equal(watch, wantWatch) {
				t.Fatalf("trial %d pick %d: Watch %v, want the band %v", trial, k, watch, wantWatch)
			}
		}
	}
}

// TestRankTreeUntracked: a pulsar-waw never told of the views (no Track)
// ranks a large fleet by the same tree, built for the pick.
func TestRankTreeUntracked(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	views := randomViews(rng, 900)
	tracked, untracked := NewPulsarWaW(DefaultParams(), nil), NewPulsarWaW(DefaultParams(), nil)
	tracked.Track(views)
	for k := range 300 {
		r := &Request{Session: rng.Uint64(), QueuedAt: -1}
		now := time.Duration(k) * 10 * ms
		if a, b := tracked.Pick(now, r, views), untracked.Pick(now, r, views); a != b {
			t.Fatalf("pick %d: tracked %+v, untracked %+v", k, a, b)
		}
	}
}

// TestRankFlatAtThreshold: up to rankFlatMax backends, pulsar-waw ranks
// flat, tracked or not (the routing study's fleets decide as before the
// tree); one backend more and the tree ranks.
func TestRankFlatAtThreshold(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, n := range []int{1, 20, 200, rankFlatMax, rankFlatMax + 1} {
		views := randomViews(rng, n)
		pw := NewPulsarWaW(DefaultParams(), nil)
		pw.Track(views)
		if (pw.tree != nil) != (n > rankFlatMax) {
			t.Fatalf("%d backends: rank tree %v, want %v", n, pw.tree != nil, n > rankFlatMax)
		}
		for k := range 200 {
			r := &Request{Session: rng.Uint64(), QueuedAt: -1}
			now := time.Duration(rng.Int64N(int64(5 * time.Second)))
			got := pw.Pick(now, r, views)
			want := referencePulsar(pw.p, now, r, views)
			if n > rankFlatMax {
				want = refTreePulsar(pw.p, now, r, views)
			}
			if got != want {
				t.Fatalf("%d backends, pick %d: %+v, want %+v", n, k, got, want)
			}
		}
	}
}

// weightedFleet is n backends with capacities of 25, 50, 100 or 200,
// all eligible and free.
func weightedFleet(rng *rand.Rand, n int) []View {
	vs := views(backends(n), 0)
	for i := range vs {
		vs[i].Capacity = 25 << rng.IntN(4)
	}
	return vs
}

// TestRankTreeShares: over a fleet of 1,000 backends of four weights, the
// share of sessions each backend ranks first is its share of the weight
// (a chi-square over the backends), and the share ranking each weight
// class second is flat rendezvous's: the tree draws the ranking by the
// same law.
func TestRankTreeShares(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 1))
	const n, sessions = 1000, 100_000
	vs := weightedFleet(rng, n)
	var tr rankTree
	tr.build(vs, false)
	total := float64(tr.wsum[0])
	first := make([]int, n)
	second := map[int]int{}
	var band []int
	for s := range sessions {
		session := mix(uint64(s))
		top, _ := tr.top(session)
		first[top]++
		band = tr.band(session, 2, band[:0])
		if band[0] != top {
			t.Fatalf("session %d: the band starts at %d, the top is %d", s, band[0], top)
		}
		second[vs[band[1]].Capacity]++
	}
	chi2 := 0.0
	for i, c := range first {
		e := sessions * float64(vs[i].Capacity) / total
		chi2 += (float64(c) - e) * (float64(c) - e) / e
	}
	// n-1 degrees of freedom: mean 999, sd 45; 6 sd above the mean.
	if limit := float64(n-1) + 6*math.Sqrt(2*float64(n-1)); chi2 > limit {
		t.Errorf("first-ranked shares: chi-square %.0f over %d backends, want <= %.0f", chi2, n, limit)
	}
	// Flat rendezvous ranks b second with probability
	// sum over a != b of (w_a/W) (w_b/(W - w_a)).
	for _, c := range []int{25, 50, 100, 200} {
		want := 0.0
		for a := range vs {
			wa := float64(vs[a].Capacity)
			others := 0.0 // weight of class c outside a
			for b := range vs {
				if b != a && vs[b].Capacity == c {
					others += float64(c)
				}
			}
			want += wa / total * others / (total - wa)
		}
		got := float64(second[c]) / sessions
		if sd := math.Sqrt(want * (1 - want) / sessions); math.Abs(got-want) > 6*sd {
			t.Errorf("weight %d ranked second by %.4f of sessions, flat rendezvous %.4f (sd %.4f)", c, got, want, sd)
		}
	}
}

// pathOf is the nodes from the root to backend i's bucket.
func pathOf(t *rankTree, i int) []int {
	path := []int{0}
	for l := 1; l <= rankLevels; l++ {
		path = append(path, rankOff[l]+int(t.back[i].key>>(64-rankBits*l)))
	}
	return path
}

// TestRankTreeDisruption: when one backend's weight grows (shrinks, or it
// leaves), a session changes backend only where a rendezvous on the
// backend's path changes its winner: the old and new paths part at one of
// the backend's ancestors, the new (old) one into the backend's subtree;
// so every session that moves lands on (leaves) the backend's quarter of
// the fleet. The share that moves is a few times the least possible.
func TestRankTreeDisruption(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 2))
	const n, sessions = 1000, 100_000
	for _, change := range []string{"grows", "shrinks", "leaves"} {
		vs := weightedFleet(rng, n)
		pw := NewPulsarWaW(DefaultParams(), nil)
		pw.Track(vs)
		tr := pw.tree
		b := rng.IntN(n)
		tops := make([]int, sessions)
		for s := range tops {
			tops[s], _ = tr.top(mix(uint64(s)))
		}
		before := tr.wsum[0]
		switch change {
		case "grows":
			vs[b].Capacity *= 4
		case "shrinks":
			vs[b].Capacity = 1
		case "leaves":
			vs[b].Eligible = false
		}
		pw.Touched(vs, b)
		after := tr.wsum[0]
		least := math.Abs(after-before) / max(after, before) // the least share that must move
		bPath := pathOf(tr, b)
		moved := 0
		for s := range tops {
			now, _ := tr.top(mix(uint64(s)))
			if now == tops[s] {
				continue
			}
			moved++
			oldPath, newPath := pathOf(tr, tops[s]), pathOf(tr, now)
			into := newPath // grows: into b's subtree
			if change != "grows" {
				into = oldPath
			}
			d := 0 // the first level where the paths part
			for d < len(oldPath) && oldPath[d] == newPath[d] {
				d++
			}
			if d == 0 || (d < len(into) && into[d] != bPath[d]) || into[d-1] != bPath[d-1] {
				t.Fatalf("%s: session %d moved from %d to %d, paths part at level %d off the path of %d", change, s, tops[s], now, d, b)
			}
			if d == len(oldPath) && change == "grows" && now != b {
				t.Fatalf("%s: session %d moved within the bucket to %d, not to %d", change, s, now, b)
			}
		}
		share := float64(moved) / sessions
		t.Logf("%s: %.4f of sessions moved, least possible %.4f", change, share, least)
		if share > float64(rankLevels+1)*least*1.5 || share < least/2 {
			t.Errorf("%s: %.4f of sessions moved; the least possible is %.4f, want within [1/2, %d] times it", change, share, least, (rankLevels+1)*3/2)
		}
	}
}

// TestRankTreeBand: the band enumerates the ranking in order, without
// the excluded backends, whatever its width.
func TestRankTreeBand(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	views := randomViews(rng, 700)
	var tr rankTree
	tr.build(views, false)
	for k := range 200 {
		r := &Request{Session: rng.Uint64(), QueuedAt: -1}
		if k%2 == 0 {
			r.Exclude = []int{rng.IntN(700), rng.IntN(700)}
		}
		width := 1 + rng.IntN(40)
		tr.exclusions(r)
		got := tr.band(r.Session, width, nil)
		order, _ := refOrder(views, false, r)
		if !slices.Equal(got, order[:width]) {
			t.Fatalf("session %d, band %d: %v, want %v", k, width, got, order[:width])
		}
	}
}

// TestPrefixTreeExact: above rankFlatMax, the prefix policy ranks the
// backends holding a prefix that counts first (by blocks held, then by the
// rank tree's order) and the others in the tree's order; its pick is that
// ranking's band, over changing fleets, with a few holders or with most
// backends holding the prompt (the walk of the tree's ranking).
func TestPrefixTreeExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for trial := range 60 {
		n := rankFlatMax + 1 + rng.IntN(300)
		bs := backends(n)
		pp := newPrefix(t, bs, nil)
		vs := randomViews(rng, n)
		for i := range vs {
			vs[i].Key = bs[i].Key
			if trial%2 == 0 && rng.IntN(2+trial%3*10) > 0 { // mostly full: long bands
				vs[i].Active = vs[i].Capacity
			}
		}
		prompts := [][]uint64{seq(1, 9), seq(100, 130), append(seq(1, 5), seq(500, 520)...)}
		dense := trial%4 == 3 // most backends hold most of one prompt, a few all of it
		for i := range vs {   // else a few backends hold some of the prompts
			switch {
			case dense && rng.IntN(6) > 0:
				q := prompts[trial/4%len(prompts)]
				q = q[:len(q)-1-rng.IntN(2)]
				if rng.IntN(40) == 0 { // a few hold more of it
					q = prompts[trial/4%len(prompts)]
				}
				pp.record(0, &Request{Blocks: q, BlockTokens: 16}, &vs[i], pp.ids[i])
				if trial%8 == 7 && rng.IntN(30) > 0 { // few free holders, the others free
					vs[i].Active = vs[i].Capacity
				}
			case dense && trial%8 == 7:
				vs[i].Active = 0
			case !dense && rng.IntN(4+trial%3*8) == 0:
				q := prompts[rng.IntN(len(prompts))]
				pp.record(0, &Request{Blocks: q[:1+rng.IntN(len(q))], BlockTokens: 16}, &vs[i], pp.ids[i])
			}
		}
		pp.Track(vs)
		for k := range 80 {
			if k%5 == 4 {
				mutate(rng, pp, vs)
			}
			if diff := sameTree(pp.pw.tree, vs); diff != "" {
				t.Fatalf("trial %d: the tree kept current differs from one built afresh: %s", trial, diff)
			}
			r := &Request{Session: rng.Uint64(), QueuedAt: -1, Blocks: prompts[rng.IntN(len(prompts))], BlockTokens: 16}
			if k%4 == 0 {
				r.Exclude = []int{rng.IntN(n), rng.IntN(n)}
			}
			now := time.Duration(rng.Int64N(int64(5 * time.Second)))
			want := refTreePrefix(pp, now, r, vs)
			if got := pp.pick(now, r, vs); got != want {
				t.Fatalf("trial %d pick %d (%d backends): tree %+v, reference %+v", trial, k, n, got, want)
			}
		}
	}
}

// refTreePrefix is the prefix policy's pick over the rank tree by its
// definition: every eligible backend's held prefix (none above the load
// limit) and time, sorted, then the band.
func refTreePrefix(pp *Prefix, now time.Duration, r *Request, views []View) Decision {
	minBlocks := max(int(math.Ceil(pp.p.Prefix.MinShare*float64(len(r.Blocks)))), 1)
	matched, best := pp.idx.MatchAtLeast(r.Blocks, minBlocks, now, nil)
	order, _ := refOrder(views, pp.p.Weight != WeightCapacity, r)
	if best > 0 {
		outstanding, capacity := 0, 0
		for _, i := range order {
			outstanding += views[i].Outstanding()
			capacity += max(views[i].Capacity, 1)
		}
		limit := float64(outstanding)/float64(max(capacity, 1)) + pp.p.Prefix.LoadSlack
		held := func(i int) int32 {
			if views[i].Utilization() > limit {
				return 0
			}
			return matched[pp.ids[i]]
		}
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(held(b), held(a)) })
	}
	return bandPick(pp.p, now, r, views, rankScores(len(views), order))
}

// BenchmarkRankCrossover is pulsar-waw's pick, flat and by the rank tree,
// around rankFlatMax: "free" with every backend free (the pick is the top
// backend), "full" with all but one full and a band of 4 (the top, the
// best free backend and the band's count).
func BenchmarkRankCrossover(b *testing.B) {
	for _, load := range []string{"free", "full"} {
		for _, n := range []int{64, 128, 256, 512, 1024} {
			for _, tree := range []bool{false, true} {
				name := fmt.Sprintf("%s/%d/flat", load, n)
				if tree {
					name = fmt.Sprintf("%s/%d/tree", load, n)
				}
				b.Run(name, func(b *testing.B) {
					vs := views(backends(n), 100)
					if load == "full" {
						for i := range vs {
							vs[i].Active = 100
						}
						vs[n/2].Active = 0
					}
					pw := NewPulsarWaW(DefaultParams(), nil)
					pw.flat = !tree
					if tree {
						pw.treeFrom = 1
					}
					pw.Track(vs)
					r := &Request{QueuedAt: -1}
					b.ReportAllocs()
					cpu := cputime.Used()
					for i := 0; b.Loop(); i++ {
						r.Session = uint64(i)
						pw.Pick(time.Second, r, vs)
					}
					b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// BenchmarkPulsarWatch is pulsar-waw's Watch after a Wait (the band's
// backends, 4 wide at 1 s), flat and by the rank tree, at 1,000 and
// 10,000 backends all full.
func BenchmarkPulsarWatch(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, flat := range []bool{false, true} {
			name := fmt.Sprintf("%d/tree", n)
			if flat {
				name = fmt.Sprintf("%d/flat", n)
			}
			b.Run(name, func(b *testing.B) {
				vs := views(backends(n), 100)
				for i := range vs {
					vs[i].Active = 100
				}
				pw := NewPulsarWaW(DefaultParams(), nil)
				pw.flat = flat
				pw.Track(vs)
				r := &Request{QueuedAt: -1}
				d := Decision{Kind: Wait}
				var out []int
				b.ReportAllocs()
				cpu := cputime.Used()
				for i := 0; b.Loop(); i++ {
					r.Session = uint64(i)
					out, _ = pw.Watch(time.Second, r, vs, d, out[:0])
				}
				b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
				if len(out) != 4 {
					b.Fatalf("band of %d, want 4", len(out))
				}
			})
		}
	}
}

// TestRankTreeJoinLeave: one backend joining (or another leaving) moves
// only a few times the least possible share of sessions at every fleet
// size, those where the tree's depth used to rise (512 -> 513, 2,048 ->
// 2,049, 8,192 -> 8,193 backends, when every bucket split and about 65% of
// sessions moved) as at the others: the tree's shape does not depend on
// the fleet's size.
func TestRankTreeJoinLeave(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 7))
	const sessions = 100_000
	for _, n := range []int{300, 512, 1000, 2048, 5000, 8192} {
		vs := weightedFleet(rng, n+1)
		gone := rng.IntN(n) // the backend that leaves the fleet of n+1
		rest := append(slices.Clone(vs[:gone]), vs[gone+1:]...)
		for i := range rest {
			rest[i].Index = i
		}
		for _, change := range []struct {
			name          string
			before, after []View
			w             float64 // the weight that joins or leaves
		}{
			{"joins", vs[:n], vs, float64(vs[n].Capacity)},
			{"leaves", vs, rest, float64(vs[gone].Capacity)},
		} {
			var tb, ta rankTree
			tb.build(change.before, false)
			ta.build(change.after, false)
			least := change.w / max(tb.wsum[0], ta.wsum[0])
			moved := 0
			for s := range sessions {
				b, _ := tb.top(mix(uint64(s)))
				a, _ := ta.top(mix(uint64(s)))
				if change.before[b].Key != change.after[a].Key {
					moved++
				}
			}
			share := float64(moved) / sessions
			t.Logf("%d -> %d backends (one %s): %.5f of sessions moved, least possible %.5f (%.1fx)",
				len(change.before), len(change.after), change.name, share, least, share/least)
			if limit := float64(rankLevels+1) * 1.5; share > limit*least || share < least/2 {
				t.Errorf("%d -> %d backends: %.5f of sessions moved; the least possible is %.5f, want within [1/2, %.1f] times it",
					len(change.before), len(change.after), share, least, limit)
			}
		}
	}
}

// TestRankBackendIsOneCacheLine keeps what a stats message touches of a
// backend in the rank tree in one 64-byte line (see rankBackend).
func TestRankBackendIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(rankBackend{}); n != 64 {
		t.Errorf("rankBackend is %d bytes, want 64 (one cache line)", n)
	}
}
