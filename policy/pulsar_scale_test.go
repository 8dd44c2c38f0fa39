package policy

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// referencePulsar is pulsar-waw's pick by its definition: every eligible
// backend scored exactly, then the band.
func referencePulsar(p Params, now time.Duration, r *Request, views []View) Decision {
	strict := anyEligible(r, views)
	measured := (&PulsarWaW{p: p}).useMeasured(views)
	scores := make([]float64, len(views))
	for i := range views {
		if !eligible(r, &views[i], strict) {
			scores[i] = math.Inf(-1)
			continue
		}
		scores[i] = Score(r.Session, &views[i], measured)
	}
	return bandPick(p, now, r, views, scores)
}

// randomViews is a fleet of n backends in a random state: capacities,
// loads, queues, measured TPS (sometimes missing), ineligible ones.
func randomViews(rng *rand.Rand, n int) []View {
	views := make([]View, n)
	for i := range views {
		c := 1 + rng.IntN(500)
		views[i] = View{Index: i, Key: KeyOf(fmt.Sprintf("b-%d", i)), Capacity: c, Active: rng.IntN(c + 2),
			Pending: rng.IntN(3), Queued: rng.IntN(6), Eligible: rng.IntN(20) > 0, MaxInputTPS: float64(rng.IntN(40000))}
		if rng.IntN(4) == 0 { // equal weights, as in a fleet of copies
			views[i].Capacity = 100
		}
	}
	return views
}

// TestPulsarPruningExact: pulsar-waw's pruned flat pick decides exactly as
// scoring every backend does, over random fleets of 1 to 3,000 backends
// (above rankFlatMax with the flat ranking forced), both weight sources,
// waits across the whole band, exclusions and queues.
func TestPulsarPruningExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 1))
	for trial := range 3000 {
		n := 1 + rng.IntN(60)
		if trial%50 == 0 {
			n = 1 + rng.IntN(3000)
		}
		views := randomViews(rng, n)
		p := DefaultParams()
		if trial%2 == 1 {
			p.Weight = WeightMaxInputTPS
		}
		if trial%7 == 0 { // every backend measured
			for i := range views {
				views[i].MaxInputTPS = 1 + float64(rng.IntN(40000))
			}
		}
		pw := NewPulsarWaW(p, nil)
		if n > rankFlatMax { // the flat ranking, which the rank tree replaces above it
			pw.flat = true
		} else if trial%3 == 0 {
			pw.Track(views) // at or below rankFlatMax, tracking changes nothing
		}
		for k := range 20 {
			r := &Request{Session: rng.Uint64(), Arrived: 0, QueuedAt: -1}
			if k%3 == 0 && n > 1 {
				r.QueuedAt = rng.IntN(n)
			}
			if k%5 == 0 {
				r.Exclude = []int{rng.IntN(n), rng.IntN(n)}
			}
			now := time.Duration(rng.Int64N(int64(5 * time.Second)))
			got, want := pw.Pick(now, r, views), referencePulsar(p, now, r, views)
			if got != want {
				t.Fatalf("trial %d pick %d (%d backends, weight %s, waited %v): pruned %+v, exact %+v", trial, k, n, p.Weight, now, got, want)
			}
		}
	}
}
