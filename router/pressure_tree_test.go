package router

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// rankTreeTestMin keeps the fleet of TestPressureTreeThroughRouter above
// the size from which pressure ranks by the rank tree (256).
const rankTreeTestMin = 270

// untrackedPressure is the pressure policy with its Tracker and
// DecayAware hidden: a router cannot tell it of changes, so it rescores
// every backend at every pick (and builds its rank tree for the pick).
type untrackedPressure struct{ p *policy.Pressure }

func (u untrackedPressure) Name() string { return u.p.Name() }
func (u untrackedPressure) Pick(now time.Duration, r *policy.Request, views []policy.View) policy.Decision {
	return u.p.Pick(now, r, views)
}
func (untrackedPressure) CapabilityAware() bool { return true }
func (u untrackedPressure) SetBackends(bs []policy.Backend, from []int) {
	u.p.SetBackends(bs, from)
}

// TestPressureTreeThroughRouter: above 256 backends, a router that keeps
// pressure's rank tree current (touching every change of a view it reads,
// telling it the decay half-lives) decides exactly as one whose pressure
// rescores every backend at every pick, over a random stream of stats
// (load, capacity, signals), results (errors and overload refusals, whose
// shares then decay), probes, eligibility switches, backends joining and
// leaving, requests (sessions that come back, some too long for some
// backends, some excluding backends), waits, timers and cancels.
func TestPressureTreeThroughRouter(t *testing.T) {
	const n = 300
	bs := make([]policy.Backend, n)
	rb := make([]Backend, n)
	for i := range n {
		name := fmt.Sprintf("backend-%03d", i)
		bs[i] = policy.Backend{Name: name, Key: policy.KeyOf(name)}
		rb[i] = Backend{Name: name, Capacity: 4}
		if i%7 == 0 {
			rb[i].MaxModelLen = 8192
		}
	}
	pp := policy.DefaultPressureParams()
	pp.Sticky.MoveScore = 0.5
	pp.Norm.BusyKnee = 1 // off: the router's own queue counts as backlog
	newRouter := func(tracked bool) *Router {
		p, err := policy.NewPressure(policy.DefaultParams(), pp, bs)
		if err != nil {
			t.Fatal(err)
		}
		var pol policy.Policy = p
		if !tracked {
			pol = untrackedPressure{p}
		}
		r, err := NewWith(0, pol, rb, Config{ErrorHalfLife: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tracked, flat := newRouter(true), newRouter(false)
	both := []*Router{tracked, flat}
	rng := rand.New(rand.NewPCG(9, 9))
	seq := map[BackendID]uint64{}
	ids := make([]BackendID, n)
	for i := range ids {
		ids[i] = BackendID(i)
	}
	added := 0
	var now time.Duration
	var id uint64
	var outs [2][]Outcome
	homes := map[uint64]BackendID{} // where each session was last dispatched
	var waited []uint64             // requests told to wait, some still waiting
	waits, dispatches, stays, cancels := 0, 0, 0, 0
	for step := range 4000 {
		if rng.IntN(3) == 0 {
			now += time.Duration(rng.IntN(400)) * time.Millisecond
		}
		b := ids[rng.IntN(len(ids))]
		switch k := rng.IntN(200); {
		case k < 1: // a backend joins or leaves: the tree is built again
			if rng.IntN(2) == 0 && len(ids) > rankTreeTestMin {
				at := rng.IntN(len(ids))
				for j, r := range both {
					var err error
					if outs[j], err = r.Remove(now, ids[at], outs[j][:0]); err != nil {
						t.Fatal(err)
					}
				}
				ids = slices.Delete(ids, at, at+1)
				break
			}
			added++
			nb := Backend{Name: fmt.Sprintf("backend-new-%d", added), Capacity: 4}
			var id BackendID
			for j, r := range both {
				var err error
				if id, outs[j], err = r.Add(now, nb, outs[j][:0]); err != nil {
					t.Fatal(err)
				}
			}
			ids = append(ids, id)
		case k < 50: // stats, from a few backends: their dispatches arrive, slots free up
			for m := range 1 + rng.IntN(6) {
				if m > 0 {
					b = ids[rng.IntN(len(ids))]
				}
				seq[b]++
				st := gateway.Stats{Backend: int(b), Seq: seq[b], Capacity: 4, Active: rng.IntN(5), Waiting: rng.IntN(2), Received: []uint64{0}}
				if rng.IntN(10) == 0 {
					st.Capacity = 1 + rng.IntN(8)
				}
				if rng.IntN(2) == 0 {
					st.Signals = &telemetry.Signals{TTFTP95: time.Duration(rng.IntN(5000)) * time.Millisecond, KVFill: rng.Float64(),
						ErrorRate: float64(rng.IntN(3)) * 0.04, QueueDepth: rng.IntN(4), Running: rng.IntN(4)}
				}
				for j, r := range both {
					st := st
					pos, _ := r.position(b)
					st.Received = []uint64{r.life[pos].dispatched}
					outs[j] = r.OnStats(now, &st, outs[j][:0])
				}
				if !slices.Equal(outs[0], outs[1]) {
					t.Fatalf("step %d at %v: stats of %d: tracked outcomes %+v, rescoring every backend %+v", step, now, b, outs[0], outs[1])
				}
			}
		case k < 90: // results
			res := Result{Kind: []ResultKind{Succeeded, Succeeded, Succeeded, Succeeded, Succeeded, Errored, Overloaded}[rng.IntN(7)]}
			for _, r := range both {
				r.OnResult(now, b, res)
			}
		case k < 100:
			rtt := time.Duration(rng.IntN(300)) * time.Millisecond
			for _, r := range both {
				r.OnProbe(now, b, rtt)
			}
		case k < 110:
			ok := rng.IntN(3) > 0
			for _, r := range both {
				r.SetEligible(b, ok)
			}
		case k < 120:
			for j, r := range both {
				outs[j] = r.OnTimer(now, outs[j][:0])
			}
		case k < 130:
			c := id - uint64(rng.IntN(int(min(id, 200))+1)) // mostly recent: some still waiting
			if len(waited) > 0 && rng.IntN(2) == 0 {
				c = waited[len(waited)-1-rng.IntN(min(len(waited), 3))]
			}
			if a, b := tracked.Cancel(c), flat.Cancel(c); a != b {
				t.Fatalf("step %d: cancel of %d: tracked %v, rescoring every backend %v", step, c, a, b)
			} else if a {
				cancels++
			}
		default: // a request
			id++
			q := Ask{Session: uint64(rng.IntN(200)), Tokens: 1000 + rng.IntN(12000)}
			if rng.IntN(8) == 0 {
				q.Exclude = []BackendID{ids[rng.IntN(len(ids))], ids[rng.IntN(len(ids))]}
			}
			got, want := tracked.Route(now, id, q), flat.Route(now, id, q)
			if got != want {
				t.Fatalf("step %d at %v: request %d (session %d): tracked %+v, rescoring every backend %+v", step, now, id, q.Session, got, want)
			}
			switch got.Kind {
			case policy.Wait:
				waits++
				waited = append(waited, id)
			case policy.Dispatch:
				dispatches++
				if h, ok := homes[q.Session]; ok && h == got.Backend {
					stays++
				}
				homes[q.Session] = got.Backend
			}
			continue
		}
		if !slices.Equal(outs[0], outs[1]) {
			t.Fatalf("step %d at %v: tracked outcomes %+v, rescoring every backend %+v", step, now, outs[0], outs[1])
		}
	}
	if id < 800 || uint64(dispatches) < id/3 || stays < 100 || waits < 50 || cancels < 20 {
		t.Fatalf("%d requests, %d dispatches (%d to the session's last backend), %d waits, %d cancelled: the stream places too little to test anything", id, dispatches, stays, waits, cancels)
	}
	t.Logf("%d requests, %d dispatches (%d to the session's last backend), %d waits, %d cancelled, %d backends at the end, %d added", id, dispatches, stays, waits, cancels, len(ids), added)
}
