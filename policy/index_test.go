package policy

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestIndexedPicksExact: least-request, random and waw's overflow decide
// over their index (Tracker) exactly as they do scanning every view, over
// random fleets of 1 to 2,000 backends changed one view at a time (loads,
// capacities, eligibility), with exclusions, ties and no eligible backend.
func TestIndexedPicksExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 3))
	for trial := range 300 {
		n := 1 + rng.IntN(40)
		if trial%30 == 0 {
			n = 1 + rng.IntN(2000)
		}
		views := randomViews(rng, n)
		for i := range views {
			views[i].Active %= 4 // many ties
		}
		bs := make([]Backend, n)
		for i := range bs {
			bs[i] = Backend{Key: views[i].Key}
		}
		seed := rng.Uint64()
		type pair struct {
			name           string
			indexed, scans Policy
		}
		pairs := []pair{
			{"least-request", &LeastRequest{}, &LeastRequest{}},
			{"random", &Random{rng: rand.New(rand.NewPCG(seed, 1))}, &Random{rng: rand.New(rand.NewPCG(seed, 1))}},
			{"waw", NewWaW(DefaultParams(), bs), NewWaW(DefaultParams(), bs)},
		}
		for _, p := range pairs {
			p.indexed.(Tracker).Track(views)
		}
		for k := range 60 {
			i := rng.IntN(n)
			switch rng.IntN(4) {
			case 0:
				views[i].Eligible = !views[i].Eligible
			case 1:
				views[i].Capacity = 1 + rng.IntN(5)
			default:
				views[i].Active, views[i].Pending, views[i].Waiting = rng.IntN(4), rng.IntN(2), rng.IntN(2)
			}
			if k%17 == 0 { // nothing eligible
				for j := range views {
					views[j].Eligible = false
				}
				for _, p := range pairs {
					p.indexed.(Tracker).Track(views)
				}
			}
			for _, p := range pairs {
				p.indexed.(Tracker).Touched(views, i)
			}
			r := &Request{Session: rng.Uint64(), QueuedAt: -1, Arrived: 0}
			if k%3 == 0 {
				r.Exclude = []int{rng.IntN(n), rng.IntN(n), i}
			}
			now := time.Duration(rng.IntN(2)) * time.Second // waw: within and past the affinity wait
			for _, p := range pairs {
				got, want := p.indexed.Pick(now, r, views), p.scans.Pick(now, r, views)
				if got != want {
					t.Fatalf("trial %d step %d, %s over %d backends: indexed %+v, scanning %+v", trial, k, p.name, n, got, want)
				}
			}
		}
	}
}
