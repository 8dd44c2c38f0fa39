package router

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// opaque hides a policy's policy.Watcher, policy.Tracker and
// policy.ErrorBlind, so that a router asks every waiting request again on
// every free slot and the policy scans every view: the behaviour before
// steady waits and indexed picks, against which TestSteadyMatchesFullRetry
// compares.
type opaque struct{ policy.Policy }

func (o opaque) SetBackends(bs []policy.Backend, from []int) {
	if m, ok := o.Policy.(policy.Membership); ok {
		m.SetBackends(bs, from)
	}
}

func (o opaque) CapabilityAware() bool {
	ca, ok := o.Policy.(policy.CapabilityAware)
	return ok && ca.CapabilityAware()
}

// TestSteadyMatchesFullRetry: a router that asks again only the waiting
// requests whose answer may have changed decides exactly as one that asks
// every waiting request again, and a policy that picks over its index
// (policy.Tracker) as one that scans, over random fleets and random
// sequences of requests, stats (loads, capacities, measured TPS), timers,
// cancellations, lost dispatches, restarts, drains, operator switches,
// limits, models, expiries and membership changes.
func TestSteadyMatchesFullRetry(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 7))
	for trial := range 150 {
		name := []string{"waw", "pulsar-waw", "pulsar-waw-tps", "least-request", "random"}[trial%5]
		n := 2 + rng.IntN(40)
		cfg := Config{}
		if trial%4 == 1 {
			cfg.HeartbeatTTL = 750 * time.Millisecond
		}
		if trial%3 == 2 {
			cfg.Capability = true
		}
		t.Run(fmt.Sprintf("%d-%s-%d", trial, name, n), func(t *testing.T) {
			steadyTrial(t, rng, name, n, cfg)
		})
	}
}

// TestSteadyMatchesFullRetryLarge is TestSteadyMatchesFullRetry over
// fleets large enough for pulsar-waw's rank tree (policy.Tracker above 256
// backends): the tree the core keeps current through Touched decides as
// one built afresh for every pick.
func TestSteadyMatchesFullRetryLarge(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 8))
	for trial := range 4 {
		name := []string{"pulsar-waw", "pulsar-waw-tps", "prefix"}[trial%3]
		n := 257 + rng.IntN(150)
		cfg := Config{}
		if trial%2 == 1 {
			cfg.HeartbeatTTL = 750 * time.Millisecond
		}
		t.Run(fmt.Sprintf("%d-%s-%d", trial, name, n), func(t *testing.T) {
			steadyTrial(t, rng, name, n, cfg)
		})
	}
}

func steadyTrial(t *testing.T, rng *rand.Rand, name string, n int, cfg Config) {
	bs := make([]policy.Backend, n)
	rb := make([]Backend, n)
	for i := range n {
		bn := fmt.Sprintf("b-%d", i)
		bs[i] = policy.Backend{Name: bn, Key: policy.KeyOf(bn)}
		rb[i] = Backend{Name: bn, Capacity: 1 + rng.IntN(3)}
	}
	// Every other backend in pool p0, the rest in p1: a request for a pool
	// hides the others from its pick, and the index must see them again.
	pools := map[string]string{}
	for i, b := range rb {
		pools[b.Name] = fmt.Sprintf("p%d", i%2)
	}
	build := func(hide bool) *Router {
		p, err := policy.NewRegistry().New(name, policy.DefaultParams(), bs, rand.New(rand.NewPCG(1, 2)))
		if err != nil {
			t.Fatal(err)
		}
		_, watcher := p.(policy.Watcher)
		_, tracker := p.(policy.Tracker)
		if !watcher && !tracker {
			t.Fatalf("%s is neither a policy.Watcher nor a policy.Tracker: nothing to compare", name)
		}
		if hide {
			p = opaque{p}
		}
		r, err := NewWith(0, p, rb, cfg)
		if err != nil {
			t.Fatal(err)
		}
		r.SetPools(pools)
		return r
	}
	inc, ref := build(false), build(true)
	type gw struct {
		seq        uint64
		capacity   int
		tps        float64
		active     int
		dispatched uint64
	}
	gws := map[BackendID]*gw{}
	names := map[BackendID]string{}
	for i := range n {
		gws[BackendID(i)] = &gw{capacity: rb[i].Capacity, tps: 1000}
		names[BackendID(i)] = rb[i].Name
	}
	var now time.Duration
	var next uint64
	waiting := map[uint64]bool{}
	members := func() []BackendID {
		out := make([]BackendID, 0, len(inc.Views()))
		for i := range inc.Views() {
			out = append(out, inc.ID(i))
		}
		return out
	}
	outcomes := func(step int, what string, a, b []Outcome) {
		t.Helper()
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("step %d (%s) at %v: steady router decided %+v, full retry %+v", step, what, now, a, b)
		}
		for _, o := range a {
			delete(waiting, o.ID)
			if o.Decision.Kind == policy.Dispatch {
				gws[o.Decision.Backend].dispatched++
			}
		}
	}
	steps := 600
	for step := range steps {
		now += time.Duration(rng.IntN(60)) * time.Millisecond
		ids := members()
		id := ids[rng.IntN(len(ids))]
		g := gws[id]
		var a, b []Outcome
		var what string
		switch k := rng.IntN(100); {
		case k < 30:
			what = "route"
			next++
			q := Ask{Session: uint64(rng.IntN(40)) * 0x9e3779b97f4a7c15, Tokens: rng.IntN(3) * 3000, Model: []string{"", "", "m1", "m2"}[rng.IntN(4)], Pool: []string{"", "", "p0", "p1"}[rng.IntN(4)]}
			if rng.IntN(8) == 0 {
				q.Exclude = []BackendID{id}
			}
			da, db := inc.Route(now, next, q), ref.Route(now, next, q)
			if da != db {
				t.Fatalf("step %d: route %d: steady %+v, full retry %+v", step, next, da, db)
			}
			switch da.Kind {
			case policy.Wait:
				waiting[next] = true
			case policy.Dispatch:
				gws[da.Backend].dispatched++
			}
			continue
		case k < 75:
			what = "stats"
			g.seq++
			if rng.IntN(20) == 0 {
				g.capacity = 1 + rng.IntN(4)
			}
			if rng.IntN(6) == 0 {
				g.tps = float64(500 + rng.IntN(2000))
			}
			g.active = rng.IntN(g.capacity + 2)
			recv := g.dispatched
			if recv > 0 && rng.IntN(3) == 0 {
				recv -= uint64(rng.IntN(int(min(recv, 3))))
			}
			st := gateway.Stats{Backend: int(id), Seq: g.seq, Capacity: g.capacity, Active: g.active, MaxInputTPS: g.tps, Received: []uint64{recv}}
			a, b = inc.OnStats(now, &st, nil), ref.OnStats(now, &st, nil)
		case k < 85:
			what = "timer"
			at, ok := inc.NextTimer()
			if atRef, okRef := ref.NextTimer(); at != atRef || ok != okRef {
				t.Fatalf("step %d: next timer %v %v, full retry %v %v", step, at, ok, atRef, okRef)
			}
			if ok && at > now {
				now = at
			}
			a, b = inc.OnTimer(now, nil), ref.OnTimer(now, nil)
		case k < 88:
			what = "cancel"
			for w := range waiting {
				if inc.Cancel(w) != ref.Cancel(w) {
					t.Fatalf("step %d: cancel %d differs", step, w)
				}
				delete(waiting, w)
				break
			}
		case k < 90:
			what = "undispatch"
			inc.Undispatch(id)
			ref.Undispatch(id)
		case k < 92:
			what = "restarted"
			_, _ = inc.Restarted(id), ref.Restarted(id)
			g.seq, g.dispatched = 0, 0
		case k < 94:
			what = "eligible"
			on := rng.IntN(2) == 0
			inc.SetEligible(id, on)
			ref.SetEligible(id, on)
		case k < 96:
			what = "drain"
			if rng.IntN(2) == 0 {
				_, _ = inc.Drain(now, id), ref.Drain(now, id)
			} else {
				_, _ = inc.Undrain(now, id), ref.Undrain(now, id)
			}
		case k < 97:
			what = "models"
			ms := [][]string{nil, {"m1"}, {"m1", "m2"}}[rng.IntN(3)]
			_, _ = inc.SetModels(now, id, ms), ref.SetModels(now, id, ms)
		case k < 98:
			what = "limit"
			res := Result{Kind: TooLong, Tokens: 3000 + rng.IntN(4000)}
			inc.OnResult(now, id, res)
			ref.OnResult(now, id, res)
		case k < 99 && len(ids) > 1:
			what = "remove"
			var err error
			if a, err = inc.Remove(now, id, nil); err != nil {
				t.Fatal(err)
			}
			if b, err = ref.Remove(now, id, nil); err != nil {
				t.Fatal(err)
			}
		default:
			what = "add"
			bn := fmt.Sprintf("b-new-%d", step)
			nb := Backend{Name: bn, Capacity: 1 + rng.IntN(3)}
			var ida, idb BackendID
			var err error
			if ida, a, err = inc.Add(now, nb, nil); err != nil {
				t.Fatal(err)
			}
			if idb, b, err = ref.Add(now, nb, nil); err != nil || ida != idb {
				t.Fatalf("add: %v, ids %d and %d", err, ida, idb)
			}
			gws[ida] = &gw{capacity: nb.Capacity, tps: 1000}
			names[ida] = bn
		}
		outcomes(step, what, a, b)
		if inc.Waiting() != ref.Waiting() {
			t.Fatalf("step %d (%s): %d waiting, full retry %d", step, what, inc.Waiting(), ref.Waiting())
		}
		for _, r := range []*Router{inc, ref} {
			// The deadline NextTimer keeps is the least of the waiters'.
			var least time.Duration
			for i, w := range r.waiters {
				if i == 0 || w.until < least {
					least = w.until
				}
			}
			if at, ok := r.NextTimer(); ok != (len(r.waiters) > 0) || (ok && at != least) {
				t.Fatalf("step %d (%s): NextTimer %v, %v; the waiters' least deadline is %v of %d", step, what, at, ok, least, len(r.waiters))
			}
		}
		checkQuiet(t, inc, step, what)
		for id, name := range names {
			got, ok := inc.Lookup(name)
			if member := slices.Contains(members(), id); ok != member || (ok && got != id) {
				t.Fatalf("step %d (%s): Lookup(%q) = %d, %v; its ID is %d, a member: %v", step, what, name, got, ok, id, member)
			}
		}
		if cfg.HeartbeatTTL > 0 {
			// Expire scans only once some backend may have run out: it
			// fails exactly those not heard within the TTL.
			ref.Backends(now)
			for _, st := range inc.Backends(now) {
				if late := now-st.LastHeard > cfg.HeartbeatTTL; late != (st.State == telemetry.Failed) {
					t.Fatalf("step %d (%s) at %v: %s last heard at %v is %s", step, what, now, st.Name, st.LastHeard, st.StateName)
				}
			}
		}
		va, vb := inc.Views(), ref.Views()
		for i := range va {
			x, y := va[i], vb[i]
			x.ErrorRate, y.ErrorRate = 0, 0 // decayed at each pick: fewer picks, other roundings
			if x != y {
				t.Fatalf("step %d (%s): view %d is %+v, full retry %+v", step, what, i, x, y)
			}
		}
	}
}

// naiveHidden is what hideIncapable hides, by its definition, looking at
// every backend.
func naiveHidden(r *Router, tokens int, model string) []int {
	elig := make([]bool, len(r.views))
	var out []int
	for i := range r.views {
		elig[i] = r.views[i].Eligible
		if model != "" && elig[i] && !Serves(r.models[i], model) {
			elig[i] = false
			out = append(out, i)
		}
	}
	if tokens <= 0 || (!r.capAware && !r.cfg.Capability) {
		return out
	}
	var over []int
	fits := false
	for i, v := range r.views {
		if !elig[i] {
			continue
		}
		if v.MaxModelLen > 0 && tokens > v.MaxModelLen {
			over = append(over, i)
		} else {
			fits = true
		}
	}
	if fits {
		out = append(out, over...)
	}
	return out
}

// TestHideIncapableMatchesScan: the capability filter, which skips its scans
// while no backend's eligibility, limit or models changed, hides exactly
// what looking at every backend hides.
func TestHideIncapableMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	for trial := range 40 {
		n := 1 + rng.IntN(30)
		rb := make([]Backend, n)
		bs := make([]policy.Backend, n)
		for i := range rb {
			rb[i] = Backend{Name: fmt.Sprintf("b-%d", i), Capacity: 2}
			bs[i] = policy.Backend{Name: rb[i].Name, Key: policy.KeyOf(rb[i].Name)}
		}
		p, err := policy.NewRegistry().New("waw", policy.DefaultParams(), bs, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewWith(0, p, rb, Config{Capability: trial%4 != 0})
		if err != nil {
			t.Fatal(err)
		}
		now := time.Duration(0)
		for step := range 300 {
			now += time.Millisecond
			id := BackendID(rng.IntN(n))
			switch rng.IntN(6) {
			case 0:
				_ = r.Advertise(now, id, []int{0, 4096, 8192}[rng.IntN(3)])
			case 1:
				_ = r.SetModels(now, id, [][]string{nil, {"m1"}, {"m1", "m2"}}[rng.IntN(3)])
			case 2:
				r.SetEligible(id, rng.IntN(3) > 0)
			case 3:
				r.OnResult(now, id, Result{Kind: TooLong, Tokens: 2000 + rng.IntN(8000)})
			}
			req := &policy.Request{Tokens: rng.IntN(4) * 3000, QueuedAt: -1}
			model := []string{"", "m1", "m2"}[rng.IntN(3)]
			want := naiveHidden(r, req.Tokens, model)
			got := slices.Clone(r.hideIncapable(req, model))
			for _, b := range got {
				r.views[b].Eligible = true
				r.touch(b)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("trial %d step %d (%d tokens, model %q): hid %v, want %v", trial, step, req.Tokens, model, got, want)
			}
		}
	}
}

// checkQuiet: while a router's summary of its waiters is valid, it says
// of them what a scan says: their count, their common generations, their
// least policy Until, and, for every position, whether some waiter
// watches it (the count retry's shortcut reads).
func checkQuiet(t *testing.T, r *Router, step int, what string) {
	t.Helper()
	q := &r.waits
	if !q.quiet || len(r.waiters) == 0 {
		return
	}
	if q.n != len(r.waiters) || len(q.watchers) != len(r.views) {
		t.Fatalf("step %d (%s): the summary counts %d waiters of %d, %d positions of %d", step, what, q.n, len(r.waiters), len(q.watchers), len(r.views))
	}
	watchers := make([]int32, len(q.watchers))
	for i, w := range r.waiters {
		if !w.watched || w.gen != q.gen || (w.tps && (!q.hasTPS || w.tpsGen != q.tpsGen)) || w.polUntil < q.until {
			t.Fatalf("step %d (%s): waiter %d (watched %v, gen %d, tps %v %d, until %v) is not as the summary says (gen %d, tps %v %d, until %v)",
				step, what, i, w.watched, w.gen, w.tps, w.tpsGen, w.polUntil, q.gen, q.hasTPS, q.tpsGen, q.until)
		}
		for _, b := range w.watch {
			watchers[b]++
		}
	}
	if !slices.Equal(watchers, q.watchers) {
		t.Fatalf("step %d (%s): watchers by position %v, the summary says %v", step, what, watchers, q.watchers)
	}
}
