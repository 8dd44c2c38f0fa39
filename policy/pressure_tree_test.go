package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/cputime"
	"github.com/stargate-llm/stargate/telemetry"
)

// refTreePressure is pressure's pick above rankFlatMax by its definition,
// with ref rescoring every backend at the pick as the flat pick does: a
// rank tree built afresh over ref's placement weights, every backend's
// time (refTimes), the session's home first while it stays (home), then
// pulsar-waw's band.
func refTreePressure(ref *Pressure, now time.Duration, r *Request, views []View) Decision {
	ref.now = max(ref.now, now)
	if ref.burst != nil && r.Arrival {
		ref.burst.arrive(now)
	}
	ref.refresh(views, ref.burst.on(ref.now))
	order, _ := treeOrder(freshPressureTree(ref, views), views, r)
	ref.scores = rankScores(len(views), order)
	return ref.stickyBandPick(now, r, views)
}

// freshPressureTree is a rank tree built afresh over pr's placement weights.
func freshPressureTree(pr *Pressure, views []View) *rankTree {
	t := &rankTree{ext: make([]float64, len(views))}
	for i := range views {
		t.ext[i] = float64(pr.state[i].Weight)
	}
	t.build(views, false)
	return t
}

// pressureFleet is a fleet as a router holds it for pressure: views, and
// each backend's decaying error rate and overload share.
type pressureFleet struct {
	views      []View
	errs, ovrs []telemetry.ErrorRate
}

func newPressureFleet(rng *rand.Rand, n int, errHalf, ovrHalf time.Duration) *pressureFleet {
	f := &pressureFleet{views: randomViews(rng, n), errs: make([]telemetry.ErrorRate, n), ovrs: make([]telemetry.ErrorRate, n)}
	for i := range f.views {
		f.errs[i].HalfLife, f.ovrs[i].HalfLife = errHalf, ovrHalf
		if rng.IntN(3) > 0 {
			f.views[i].Signals = randomSignals(rng)
		}
	}
	return f
}

func randomSignals(rng *rand.Rand) *telemetry.Signals {
	return &telemetry.Signals{QueueDepth: rng.IntN(8), Running: rng.IntN(20), TTFTP95: time.Duration(rng.IntN(6000)) * time.Millisecond,
		ErrorRate: float64(rng.IntN(4)) * 0.03, KVFill: rng.Float64(), Hardware: rng.IntN(2) == 0, GPUUtil: rng.Float64(),
		MemUtil: rng.Float64(), SMOccupancy: rng.Float64(), DRAMActive: rng.Float64(), TempC: 60 + 30*rng.Float64(),
		SMClockMHz: 1500 + float64(rng.IntN(480)), MaxSMClockMHz: 1980}
}

// change changes a few random backends at now as a router would (its
// stats, probes and results), telling the tracker.
func (f *pressureFleet) change(rng *rand.Rand, now time.Duration, tr Tracker) {
	for range rng.IntN(8) {
		i := rng.IntN(len(f.views))
		v := &f.views[i]
		switch rng.IntN(8) {
		case 0:
			v.Eligible = !v.Eligible
		case 1:
			v.Capacity = 1 + rng.IntN(500)
		case 2:
			v.Signals = randomSignals(rng)
		case 3:
			v.Path = telemetry.Path{Known: rng.IntN(4) > 0, RTT: time.Duration(rng.IntN(300)) * time.Millisecond,
				Jitter: time.Duration(rng.IntN(30)) * time.Millisecond}
		case 4: // answers, some failed
			for range 1 + rng.IntN(20) {
				f.errs[i].Observe(now, rng.IntN(4) == 0)
			}
			v.ErrorRate = f.errs[i].Rate(now)
		case 5: // answers, some overload refusals
			for range 1 + rng.IntN(10) {
				f.ovrs[i].Observe(now, rng.IntN(2) == 0)
			}
			v.Overload = f.ovrs[i].Rate(now)
		default:
			v.Active, v.Pending, v.Waiting, v.Queued = rng.IntN(v.Capacity+2), rng.IntN(3), rng.IntN(v.Capacity/2+2), rng.IntN(4)
		}
		tr.Touched(f.views, i)
	}
}

// decay brings every rate to now, as a router does before each pick,
// without telling the tracker.
func (f *pressureFleet) decay(now time.Duration) {
	for i := range f.views {
		f.views[i].ErrorRate = f.errs[i].Rate(now)
		f.views[i].Overload = f.ovrs[i].Rate(now)
	}
}

// TestPressureTreeExact: above rankFlatMax, pressure's pick over the tree
// it keeps current (rescoring only what was touched, what a decay deadline
// says may have moved, and the session's home) decides exactly as
// rescoring every backend at every pick and ranking them all by their
// times in a tree built afresh does, and its levels and tree equal theirs,
// over random fleets of 257 to 3,000 backends whose load, eligibility,
// capacity, signals, paths, errors and overload refusals change between
// picks while time advances (the rates decaying), with sticky sessions
// (some leaving a backend by score or by the cost comparison), exclusions
// and queues. In some trials the router leaves the decay to the policy and
// the views' rates are stale at the pick: the policy must bring the ones it
// rescores to now itself.
func TestPressureTreeExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	bursts := 0
	for trial := range 8 {
		n := rankFlatMax + 1 + rng.IntN(400)
		if trial%8 == 0 {
			n = rankFlatMax + 1 + rng.IntN(1200)
		}
		errHalf := time.Duration(1+rng.IntN(10)) * time.Second
		if trial%5 == 4 {
			errHalf = 0 // not decaying
		}
		fleet := newPressureFleet(rng, n, errHalf, time.Second)
		views := fleet.views
		pp := DefaultPressureParams()
		switch trial % 4 {
		case 1:
			pp.Sticky.MoveScore = 0.3
		case 2:
			pp.Sticky.RePrefillTPS = 5000
		case 3:
			pp.Sticky.Sessions = 0
		}
		if trial%3 == 0 {
			pp.Projector.Hysteresis = rng.IntN(30)
		}
		tree, err := NewPressure(DefaultParams(), pp, nil)
		if err != nil {
			t.Fatal(err)
		}
		ref, _ := NewPressure(DefaultParams(), pp, nil)
		lazy := false     // the views' rates are stale at the pick but for what the policy refreshes
		if trial%7 != 6 { // else never told: rescores the decaying backends at every pick
			var refresh func(time.Duration, int)
			if trial%2 == 0 { // the router leaves the decay to the policy
				lazy = trial%4 == 2
				refresh = func(now time.Duration, i int) {
					views[i].ErrorRate, views[i].Overload = fleet.errs[i].Rate(now), fleet.ovrs[i].Rate(now)
				}
			}
			tree.SetDecay(errHalf, time.Second, refresh)
		}
		tree.Track(views)
		if tree.tree == nil {
			t.Fatalf("%d backends: not tracked by a rank tree", n)
		}
		sessions := make([]uint64, 40)
		for i := range sessions {
			sessions[i] = rng.Uint64()
		}
		var now time.Duration
		for k := range 120 {
			burst := k%60 >= 45 // a burst of arrivals (the detector is armed after its 30 s baseline)
			switch rng.IntN(4) {
			case 0: // the same instant
			case 1:
				if burst {
					break
				}
				now += time.Duration(rng.IntN(20_000)) * time.Second / 1000 // up to 20 s: rates decay through levels
			default:
				now += time.Duration(rng.IntN(300)) * time.Millisecond
			}
			fleet.change(rng, now, tree)
			if !lazy {
				fleet.decay(now)
			}
			r := &Request{Session: sessions[rng.IntN(len(sessions))], QueuedAt: -1, Arrived: now - time.Duration(rng.IntN(3000))*time.Millisecond,
				Tokens: rng.IntN(50_000)}
			if burst || rng.IntN(2) == 0 { // new at the router: an arrival for the burst detector
				r.Arrived, r.Arrival = now, true
			} else if k%3 == 0 {
				r.QueuedAt = rng.IntN(n)
			}
			switch k % 7 {
			case 0:
				r.Exclude = []int{rng.IntN(n), rng.IntN(n), rng.IntN(n)}
			case 2: // every backend refused: the exclusions do not count
				for i := range n {
					r.Exclude = append(r.Exclude, i)
				}
			}
			got := tree.Pick(now, r, views)
			if lazy {
				fleet.decay(now) // the reference rescores every backend from its rates at now
			}
			want := refTreePressure(ref, now, r, views)
			if got != want {
				t.Fatalf("trial %d pick %d (%d backends, at %v): tree %+v, reference %+v", trial, k, n, now, got, want)
			}
			for i := range views {
				if g, w := tree.state[i], ref.state[i]; g.Rank != w.Rank || g.Weight != w.Weight {
					t.Fatalf("trial %d pick %d at %v: backend %d (error rate %v, overload %v) at level %d weight %d, rescoring every backend gives %d and %d",
						trial, k, now, i, views[i].ErrorRate, views[i].Overload, g.Rank, g.Weight, w.Rank, w.Weight)
				}
			}
			if diff := sameRankTree(tree.tree.t, freshPressureTree(ref, views)); diff != "" {
				t.Fatalf("trial %d pick %d: the tree kept current differs from one built afresh: %s", trial, k, diff)
			}
			if got.Kind == Dispatch { // as a router counts it
				views[got.Backend].Pending++
				tree.Touched(views, got.Backend)
			}
			if ref.burst.on(now) {
				bursts++
			}
		}
	}
	if bursts == 0 {
		t.Fatalf("the burst detector never fired: the test does not test the tree through bursts")
	}
	t.Logf("%d picks with the burst detector on", bursts)
}

// TestPressureNextChangeHugeHalfLife: whatever the half-lives (up to the
// largest Duration) and the time, a backend whose level its rates' decay
// will move gets a deadline no earlier than now, through which its level
// holds.
func TestPressureNextChangeHugeHalfLife(t *testing.T) {
	halves := []time.Duration{time.Millisecond, 5 * time.Second, time.Hour, 1 << 62, math.MaxInt64}
	for _, h := range halves {
		for _, now := range []time.Duration{0, time.Hour, math.MaxInt64 / 2, math.MaxInt64 - time.Second} {
			pr, err := NewPressure(DefaultParams(), DefaultPressureParams(), nil)
			if err != nil {
				t.Fatal(err)
			}
			pr.SetDecay(h, h, nil)
			v := View{Capacity: 10, Eligible: true, ErrorRate: 0.3, Overload: 0.5}
			st := BackendWeight{Rank: DefaultPressureParams().Projector.Max}
			pr.refreshOne(&v, &st, false)
			if pr.keeps(&v, st.Rank, -1) {
				t.Fatalf("level %d holds with the rates at zero: the test does not test a deadline", st.Rank)
			}
			at, ok := pr.nextChange(&v, st.Rank, now)
			if !ok || at < now {
				t.Fatalf("half-life %v, now %v: deadline %v (%v), want one at or after now", h, now, at, ok)
			}
			if !pr.keeps(&v, st.Rank, at-now) {
				t.Fatalf("half-life %v, now %v: the level moves before its deadline %v", h, now, at)
			}
		}
	}
}

// sameRankTree reports how got differs from want, "" if in nothing.
func sameRankTree(got, want *rankTree) string {
	switch {
	case !slices.Equal(rankWeights(got), rankWeights(want)):
		for i := range got.back {
			if got.back[i].w != want.back[i].w {
				return fmt.Sprintf("backend %d weighs %v, afresh %v", i, got.back[i].w, want.back[i].w)
			}
		}
		return "backends differ"
	case !slices.Equal(got.wsum, want.wsum):
		return "node weights differ"
	case !slices.Equal(got.elig, want.elig) || !slices.Equal(got.free, want.free):
		return "node counts differ"
	case got.sumOut != want.sumOut || got.sumCap != want.sumCap:
		return fmt.Sprintf("sums %d/%d, afresh %d/%d", got.sumOut, got.sumCap, want.sumOut, want.sumCap)
	}
	return ""
}

// TestPressureTreeUntracked: a pressure never told of the views (no Track)
// ranks a large fleet by the same tree, built for the pick over every
// backend rescored.
func TestPressureTreeUntracked(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	fleet := newPressureFleet(rng, 700, 5*time.Second, time.Second)
	untracked, _ := NewPressure(DefaultParams(), DefaultPressureParams(), nil)
	ref, _ := NewPressure(DefaultParams(), DefaultPressureParams(), nil)
	var now time.Duration
	for k := range 200 {
		now += time.Duration(rng.IntN(500)) * time.Millisecond
		fleet.change(rng, now, untracked) // untracked: Touched does nothing
		fleet.decay(now)
		r := &Request{Session: uint64(rng.IntN(30)), QueuedAt: -1, Arrived: now}
		if got, want := untracked.Pick(now, r, fleet.views), refTreePressure(ref, now, r, fleet.views); got != want {
			t.Fatalf("pick %d: untracked %+v, reference %+v", k, got, want)
		}
	}
}

// TestPressureTreeSticky: above rankFlatMax a session stays on the backend
// it was dispatched to while that one is eligible, whatever the weights
// do; it moves once the backend fails, and comes back to weighted
// placement.
func TestPressureTreeSticky(t *testing.T) {
	bs := backends(1000)
	vs := views(bs, 10)
	pr, err := NewPressure(DefaultParams(), DefaultPressureParams(), bs)
	if err != nil {
		t.Fatal(err)
	}
	pr.SetDecay(10*time.Second, time.Second, nil)
	pr.Track(vs)
	homes := make(map[uint64]int)
	for s := range uint64(200) {
		d := pr.Pick(time.Second, &Request{Session: s, QueuedAt: -1, Arrived: time.Second}, vs)
		if d.Kind != Dispatch {
			t.Fatalf("session %d: %+v on an idle fleet", s, d)
		}
		homes[s] = d.Backend
	}
	// Load every home heavily (still with free slots): its weight falls,
	// so weighted rendezvous would place many sessions elsewhere.
	for _, h := range homes {
		vs[h].Active, vs[h].Queued = 9, 0
		vs[h].Signals = &telemetry.Signals{TTFTP95: 4 * time.Second, KVFill: 0.9}
		pr.Touched(vs, h)
	}
	for s, h := range homes {
		d := pr.Pick(2*time.Second, &Request{Session: s, QueuedAt: -1, Arrived: 2 * time.Second}, vs)
		if d.Kind != Dispatch || d.Backend != h {
			t.Fatalf("session %d: %+v, want its home %d", s, d, h)
		}
	}
	if pr.state[homes[0]].Rank == DefaultPressureParams().Projector.Max {
		t.Fatalf("the loaded home kept the top level; the test does not test stickiness")
	}
	// The homes fail: every session moves to an eligible backend.
	for _, h := range homes {
		vs[h].Eligible = false
		pr.Touched(vs, h)
	}
	for s, h := range homes {
		d := pr.Pick(3*time.Second, &Request{Session: s, QueuedAt: -1, Arrived: 3 * time.Second}, vs)
		if d.Kind != Dispatch || d.Backend == h || !vs[d.Backend].Eligible {
			t.Fatalf("session %d: %+v after its home %d failed", s, d, h)
		}
	}
}

// BenchmarkPressureTreeChurn is pressure's pick when the fleet moves
// between picks as a router sees it: before each pick one backend's load
// changes (touched: rescored at the pick), a tenth of the backends have
// error rates and overload shares whose decay moves their levels (their
// deadlines come due as the clock advances 1 ms a pick), and every pick
// is of a session with a home. Beside it the flat pick, which rescores
// every backend.
func BenchmarkPressureTreeChurn(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		for _, flat := range []bool{false, true} {
			name := fmt.Sprintf("pressure/%d", n)
			if flat {
				name = fmt.Sprintf("pressure-flat/%d", n)
			}
			b.Run(name, func(b *testing.B) {
				bs := backends(n)
				vs := views(bs, 100)
				rng := rand.New(rand.NewPCG(1, 1))
				for i := range vs {
					vs[i].Active = rng.IntN(100)
					vs[i].Signals = randomSignals(rng)
					if i%10 == 0 {
						vs[i].ErrorRate, vs[i].Overload = 0.02, 0.1
					}
				}
				pr, err := NewPressure(DefaultParams(), DefaultPressureParams(), bs)
				if err != nil {
					b.Fatal(err)
				}
				pr.SetDecay(10*time.Second, time.Second, nil)
				pr.flat = flat
				pr.Track(vs)
				r := &Request{QueuedAt: -1}
				for s := range uint64(1000) { // the sessions get homes
					r.Session, r.Arrived = s, 0
					pr.Pick(0, r, vs)
				}
				b.ReportAllocs()
				cpu := cputime.Used()
				for i := 0; b.Loop(); i++ {
					now := time.Duration(i+1) * time.Millisecond
					j := rng.IntN(n)
					vs[j].Active = rng.IntN(100)
					pr.Touched(vs, j)
					r.Session, r.Arrived = uint64(i%1000), now
					pr.Pick(now, r, vs)
				}
				b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// TestPressureFlatAtThreshold: up to rankFlatMax backends pressure, tracked
// and told of the decay as a router does, picks exactly as the flat pick
// (rescoring every backend, flat rendezvous) and asks the router to decay
// every rate before each pick; one more backend and it ranks by the tree.
func TestPressureFlatAtThreshold(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for _, n := range []int{1, 20, 200, rankFlatMax, rankFlatMax + 1} {
		fleet := newPressureFleet(rng, n, 5*time.Second, time.Second)
		views := fleet.views
		tracked, _ := NewPressure(DefaultParams(), DefaultPressureParams(), nil)
		tracked.SetDecay(5*time.Second, time.Second, func(now time.Duration, i int) {
			views[i].ErrorRate, views[i].Overload = fleet.errs[i].Rate(now), fleet.ovrs[i].Rate(now)
		})
		tracked.Track(views)
		flat, _ := NewPressure(DefaultParams(), DefaultPressureParams(), nil)
		flat.flat = true
		ref, _ := NewPressure(DefaultParams(), DefaultPressureParams(), nil)
		tree := n > rankFlatMax
		if (tracked.tree != nil) != tree || tracked.DecaysAll(n) == tree {
			t.Fatalf("%d backends: rank tree %v, decays all %v; want tree %v", n, tracked.tree != nil, tracked.DecaysAll(n), tree)
		}
		var now time.Duration
		for k := range 200 {
			now += time.Duration(rng.IntN(300)) * time.Millisecond
			fleet.change(rng, now, tracked)
			fleet.decay(now)
			r := &Request{Session: uint64(rng.IntN(50)), QueuedAt: -1, Arrived: now}
			got := tracked.Pick(now, r, views)
			want := flat.Pick(now, r, views)
			if tree {
				want = refTreePressure(ref, now, r, views)
			}
			if got != want {
				t.Fatalf("%d backends, pick %d: %+v, want %+v", n, k, got, want)
			}
			if !tree && !slices.Equal(tracked.Weights(views, nil), flat.Weights(views, nil)) {
				t.Fatalf("%d backends, pick %d: the weights differ from the flat pick's", n, k)
			}
		}
	}
}
