package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stargate-llm/stargate/internal/cputime"
	"github.com/stargate-llm/stargate/telemetry"
)

const ms = time.Millisecond

func backends(n int) []Backend {
	bs := make([]Backend, n)
	for i := range bs {
		name := fmt.Sprintf("backend-%02d", i)
		bs[i] = Backend{Name: name, Key: KeyOf(name)}
	}
	return bs
}

func views(bs []Backend, capacity int) []View {
	vs := make([]View, len(bs))
	for i, b := range bs {
		vs[i] = View{Index: i, Key: b.Key, Capacity: capacity, Eligible: true}
	}
	return vs
}

func newPolicy(t testing.TB, name string, bs []Backend) Policy {
	t.Helper()
	p, err := NewRegistry().New(name, DefaultParams(), bs, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRingStability: when one of 20 backends leaves the ring, the sessions of
// the other 19 stay where they were (at least 95%; consistent hashing promises all).
func TestRingStability(t *testing.T) {
	bs := backends(20)
	full := NewWaW(DefaultParams(), bs)
	vs := views(bs, 100)
	for leaving := range bs {
		less := views(bs, 100)
		less[leaving].Eligible = false
		stayed, others := 0, 0
		for s := uint64(1); s <= 20_000; s++ {
			r := &Request{Session: s, QueuedAt: -1}
			before := full.Affine(r, vs, true)
			if before == leaving {
				continue
			}
			others++
			if full.Affine(r, less, true) == before {
				stayed++
			}
		}
		if frac := float64(stayed) / float64(others); frac < 0.95 {
			t.Errorf("backend %d left: %.4f of the others' sessions stayed, want >= 0.95", leaving, frac)
		}
	}
	// Rebuilding the ring without the backend gives the same placement.
	rebuilt := NewWaW(DefaultParams(), append(append([]Backend(nil), bs[:3]...), bs[4:]...))
	moved := 0
	for s := uint64(1); s <= 20_000; s++ {
		r := &Request{Session: s, QueuedAt: -1}
		before := full.Affine(r, vs, true)
		after := rebuilt.Affine(r, views(rebuilt.backendsForTest(bs, 3), 100), true)
		if before != 3 && bs[before].Name != rebuilt.nameForTest(bs, 3, after) {
			moved++
		}
	}
	if moved > 20_000/20 {
		t.Errorf("rebuilt ring moved %d sessions of the remaining backends", moved)
	}
}

func (w *WaW) backendsForTest(bs []Backend, removed int) []Backend {
	return append(append([]Backend(nil), bs[:removed]...), bs[removed+1:]...)
}

func (w *WaW) nameForTest(bs []Backend, removed, idx int) string {
	if idx >= removed {
		idx++
	}
	return bs[idx].Name
}

// TestRendezvousShares: with weights w_b, backend b ranks first for a share of
// sessions w_b / sum(w), within 2% of that share over 100,000 keys.
func TestRendezvousShares(t *testing.T) {
	weights := []float64{7, 4, 2, 3, 14, 6, 12, 9, 19, 8, 10, 13, 11, 16, 15, 20, 18, 17, 11, 5}
	bs := backends(len(weights))
	vs := views(bs, 100)
	total := 0.0
	for i, w := range weights {
		vs[i].MaxInputTPS = w
		total += w
	}
	counts := make([]int, len(vs))
	const keys = 100_000
	for s := uint64(1); s <= keys; s++ {
		best, bestScore := -1, math.Inf(-1)
		for i := range vs {
			if sc := Score(s, &vs[i], true); sc > bestScore {
				best, bestScore = i, sc
			}
		}
		counts[best]++
	}
	for i, w := range weights {
		want := w / total
		got := float64(counts[i]) / keys
		// Binomial noise on the smallest share (0.9%) is 3% of it: allow 2% of
		// the share or three standard deviations, whichever is larger.
		tol := math.Max(0.02*want, 3*math.Sqrt(want*(1-want)/keys))
		if math.Abs(got-want) > tol {
			t.Errorf("backend %d (weight %v): share %.4f, want %.4f +/- %.4f", i, w, got, want, tol)
		}
	}
}

func TestWaWWaitThenOverflow(t *testing.T) {
	bs := backends(4)
	w := NewWaW(DefaultParams(), bs)
	vs := views(bs, 2)
	r := &Request{Session: 42, QueuedAt: -1}
	a := w.Affine(r, vs, true)
	if d := w.Pick(0, r, vs); d.Kind != Dispatch || d.Backend != a {
		t.Fatalf("free affine backend: %+v, want dispatch to %d", d, a)
	}
	vs[a].Active = 2 // full
	other := (a + 1) % 4
	vs[other].Active = 1 // half full; the other two are less utilized
	d := w.Pick(100*ms, r, vs)
	if d.Kind != Wait || d.Backend != a || d.Until != 300*ms {
		t.Fatalf("full affine backend: %+v, want wait at %d until 300ms", d, a)
	}
	vs[a].Queued = 4
	if d := w.Pick(100*ms, r, vs); d.Kind != Dispatch || d.Backend == a {
		t.Fatalf("full affine queue: %+v, want overflow", d)
	}
	r.QueuedAt = a // already queued there: keeps its place
	if d := w.Pick(200*ms, r, vs); d.Kind != Wait {
		t.Fatalf("queued request at 200ms: %+v, want wait", d)
	}
	for i := range vs {
		vs[i].Active = 2 // every backend full; the overflow goes to the lowest utilization anyway
	}
	vs[other].Waiting = -1
	if d := w.Pick(300*ms, r, vs); d.Kind != Dispatch || d.Backend != other {
		t.Fatalf("wait over: %+v, want overflow to the least utilized backend %d", d, other)
	}
}

func TestPulsarBandWidening(t *testing.T) {
	bs := backends(5)
	p := NewPulsarWaW(DefaultParams(), bs)
	vs := views(bs, 2)
	r := &Request{Session: 7, QueuedAt: -1}
	// Rank backends for this session.
	order := make([]int, 0, 5)
	for len(order) < 5 {
		best, bestScore := -1, math.Inf(-1)
		for i := range vs {
			if !contains(order, i) {
				if s := Score(r.Session, &vs[i], false); s > bestScore {
					best, bestScore = i, s
				}
			}
		}
		order = append(order, best)
	}
	// Ranks 0 and 1 full, rank 2 free.
	vs[order[0]].Active, vs[order[1]].Active = 2, 2
	tests := []struct {
		at   time.Duration
		want Kind
		to   int
	}{
		{0, Wait, order[0]},            // band = top 1
		{299 * ms, Wait, order[0]},     // still top 1
		{300 * ms, Wait, order[0]},     // band = top 2, both full
		{600 * ms, Dispatch, order[2]}, // band = top 3
	}
	for _, tt := range tests {
		d := p.Pick(tt.at, r, vs)
		if d.Kind != tt.want || d.Backend != tt.to {
			t.Errorf("at %v: %+v, want %v to %d", tt.at, d, tt.want, tt.to)
		}
	}
	// Everything full: wait until 4 s, then reject.
	for i := range vs {
		vs[i].Active = 2
	}
	if d := p.Pick(3900*ms, r, vs); d.Kind != Wait || d.Until != 4*time.Second {
		t.Errorf("at 3.9s: %+v, want wait until 4s", d)
	}
	if d := p.Pick(4*time.Second, r, vs); d.Kind != Reject {
		t.Errorf("at 4s: %+v, want reject", d)
	}
	// Full top queue: overflow only to a free backend, else reject.
	vs[order[0]].Queued = 4
	if d := p.Pick(0, r, vs); d.Kind != Reject {
		t.Errorf("queue full, nothing free: %+v, want reject", d)
	}
	vs[order[4]].Active = 0
	if d := p.Pick(0, r, vs); d.Kind != Dispatch || d.Backend != order[4] {
		t.Errorf("queue full, rank 4 free: %+v, want dispatch to %d", d, order[4])
	}
}

func contains(xs []int, x int) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func TestPulsarWeightSource(t *testing.T) {
	bs := backends(2)
	vs := views(bs, 100)
	vs[1].Capacity = 1_000_000 // by capacity backend 1 wins nearly every session
	vs[0].MaxInputTPS, vs[1].MaxInputTPS = 1_000_000, 1
	r := &Request{Session: 3, QueuedAt: -1}
	if d := NewPulsarWaW(DefaultParams(), bs).Pick(0, r, vs); d.Backend != 1 {
		t.Errorf("default capacity weights: picked %d, want 1", d.Backend)
	}
	p := newPolicy(t, "pulsar-waw-tps", bs)
	if d := p.Pick(0, r, vs); d.Backend != 0 {
		t.Errorf("measured weights: picked %d, want 0", d.Backend)
	}
	vs[1].MaxInputTPS = 0 // one backend unmeasured: capacity for all
	if d := p.Pick(0, r, vs); d.Backend != 1 {
		t.Errorf("capacity fallback: picked %d, want 1", d.Backend)
	}
}

func TestBaselines(t *testing.T) {
	bs := backends(3)
	vs := views(bs, 10)
	vs[0].Active, vs[1].Active, vs[2].Active = 5, 1, 3
	rr := newPolicy(t, "round-robin", bs)
	var got []int
	for range 4 {
		got = append(got, rr.Pick(0, &Request{QueuedAt: -1}, vs).Backend)
	}
	if fmt.Sprint(got) != "[0 1 2 0]" {
		t.Errorf("round-robin order %v, want [0 1 2 0]", got)
	}
	if d := newPolicy(t, "least-request", bs).Pick(0, &Request{QueuedAt: -1}, vs); d.Backend != 1 {
		t.Errorf("least-request picked %d, want 1", d.Backend)
	}
	// Excluded backends are skipped while another is eligible.
	if d := newPolicy(t, "least-request", bs).Pick(0, &Request{QueuedAt: -1, Exclude: []int{1}}, vs); d.Backend != 2 {
		t.Errorf("least-request with 1 excluded picked %d, want 2", d.Backend)
	}
	// Power of two never picks the most loaded of three (it loses every pair).
	p2 := newPolicy(t, "power-of-two", bs)
	for range 200 {
		if d := p2.Pick(0, &Request{QueuedAt: -1}, vs); d.Backend == 0 {
			t.Fatal("power-of-two picked the most loaded backend")
		}
	}
	rnd := newPolicy(t, "random", bs)
	seen := map[int]int{}
	for range 300 {
		seen[rnd.Pick(0, &Request{QueuedAt: -1}, vs).Backend]++
	}
	for b := range 3 {
		if seen[b] < 60 {
			t.Errorf("random picked backend %d %d times of 300", b, seen[b])
		}
	}
	vs[0].Eligible, vs[1].Eligible, vs[2].Eligible = false, false, false
	for _, name := range NewRegistry().Names() {
		if d := newPolicy(t, name, bs).Pick(0, &Request{QueuedAt: -1}, vs); d.Kind != Reject {
			t.Errorf("%s with no eligible backend: %+v, want reject", name, d)
		}
	}
}

func TestRegistry(t *testing.T) {
	reg := NewRegistry()
	if _, err := reg.New("nope", DefaultParams(), backends(2), nil); err == nil {
		t.Error("unknown policy accepted")
	}
	bad := DefaultParams()
	bad.Weight = "vibes"
	if _, err := reg.New("pulsar-waw", bad, backends(2), nil); err == nil {
		t.Error("bad params accepted")
	}
	want := "[least-request power-of-two prefix pressure pulsar-waw pulsar-waw-tps random round-robin waw]"
	if got := fmt.Sprint(reg.Names()); got != want {
		t.Errorf("Names() = %s, want %s", got, want)
	}
}

// pickPolicy is a registered policy for BenchmarkPick; flat: with the flat
// ranking (PulsarWaW.flat) at every size.
type pickPolicy struct {
	name string
	flat bool
}

func (p pickPolicy) String() string {
	if p.flat {
		return p.name + "-flat"
	}
	return p.name
}

// pickPolicies are every registered policy, then those that rank by
// weighted rendezvous again with the flat ranking.
func pickPolicies() []pickPolicy {
	var out []pickPolicy
	for _, name := range NewRegistry().Names() {
		out = append(out, pickPolicy{name: name})
	}
	for _, name := range []string{"prefix", "pressure", "pulsar-waw", "pulsar-waw-tps"} {
		out = append(out, pickPolicy{name: name, flat: true})
	}
	return out
}

// BenchmarkPick is every policy's pick at 20, 1,000 and 10,000 backends;
// the -flat variants rank flat at every size (as before the rank tree).
func BenchmarkPick(b *testing.B) {
	for _, n := range []int{20, 1000, 10000} {
		bs := backends(n)
		for _, pol := range pickPolicies() {
			name, flat := pol.name, pol.flat
			b.Run(fmt.Sprintf("%s/%d", pol, n), func(b *testing.B) {
				p := newPolicy(b, name, bs)
				vs := views(bs, 100)
				for i := range vs {
					vs[i].Active = 100 // all full: the affinity policies take their longest path
					vs[i].MaxInputTPS = float64(1000 + i)
				}
				vs[n/2].Active = 0
				if da, ok := p.(DecayAware); ok {
					da.SetDecay(10*time.Second, time.Second, nil) // as a router does
				}
				if tr, ok := p.(Tracker); ok {
					tr.Track(vs) // as a router does (router.Router tells it every change)
				}
				if flat { // the ranking before the rank tree, for comparison
					switch p := p.(type) {
					case *PulsarWaW:
						p.flat, p.tree = true, nil
					case *Prefix:
						p.pw.flat, p.pw.tree = true, nil
					case *Pressure:
						p.flat, p.tree = true, nil
					default:
						b.Skip("no flat ranking")
					}
				}
				r := &Request{QueuedAt: -1, Arrived: 0}
				b.ReportAllocs()
				cpu := cputime.Used()
				for i := 0; b.Loop(); i++ {
					r.Session = uint64(i)
					p.Pick(time.Second, r, vs)
				}
				b.ReportMetric(float64(cputime.Used()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkPressureUpdate is one routing update of the pressure policy:
// every backend's signals normalised, scored and projected to a weight.
func BenchmarkPressureUpdate(b *testing.B) {
	for _, n := range []int{9, 1000} {
		b.Run(fmt.Sprintf("backends=%d", n), func(b *testing.B) {
			pr, err := NewPressure(DefaultParams(), DefaultPressureParams(), nil)
			if err != nil {
				b.Fatal(err)
			}
			vs := make([]View, n)
			for i := range vs {
				sig := &telemetry.Signals{QueueDepth: i % 7, Running: 10, TTFTP95: time.Duration(i%5) * 100 * time.Millisecond,
					ErrorRate: float64(i%3) / 100, KVFill: 0.5, Hardware: i%4 != 0, GPUUtil: 0.7, MemUtil: 0.6, SMOccupancy: 0.5,
					DRAMActive: 0.4, TempC: 60, SMClockMHz: 1800, MaxSMClockMHz: 1980}
				vs[i] = View{Index: i, Capacity: 25, Eligible: true, Signals: sig}
			}
			out := make([]BackendWeight, 0, n)
			b.ReportAllocs()
			for b.Loop() {
				out = pr.Weights(vs, out[:0])
			}
			if out[0].Weight == 0 {
				b.Fatal("no weight projected")
			}
		})
	}
}

// TestViewLayout keeps what a stats message writes and a pick reads first
// in a view's first 64 bytes (see View).
func TestViewLayout(t *testing.T) {
	var v View
	for _, f := range []struct {
		name     string
		off, len uintptr
	}{
		{"Capacity", unsafe.Offsetof(v.Capacity), unsafe.Sizeof(v.Capacity)},
		{"Active", unsafe.Offsetof(v.Active), unsafe.Sizeof(v.Active)},
		{"Waiting", unsafe.Offsetof(v.Waiting), unsafe.Sizeof(v.Waiting)},
		{"Pending", unsafe.Offsetof(v.Pending), unsafe.Sizeof(v.Pending)},
		{"MaxInputTPS", unsafe.Offsetof(v.MaxInputTPS), unsafe.Sizeof(v.MaxInputTPS)},
		{"Signals", unsafe.Offsetof(v.Signals), unsafe.Sizeof(v.Signals)},
		{"Key", unsafe.Offsetof(v.Key), unsafe.Sizeof(v.Key)},
		{"Eligible", unsafe.Offsetof(v.Eligible), unsafe.Sizeof(v.Eligible)},
		{"State", unsafe.Offsetof(v.State), unsafe.Sizeof(v.State)},
	} {
		if f.off+f.len > 64 {
			t.Errorf("View.%s ends at byte %d, want within the first 64", f.name, f.off+f.len)
		}
	}
}
