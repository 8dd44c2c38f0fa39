package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestArrivalsPopInTimeOrder: whatever the order of pushes, the heap hands
// back every arrival, earliest first.
func TestArrivalsPopInTimeOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var h arrivals
		var want, got []time.Duration
		for i := range 200 {
			at := time.Duration(rng.IntN(1000))
			h.push(arrival{at: at, backend: int32(i)})
			want = append(want, at)
		}
		for len(h) > 0 {
			got = append(got, h.pop().at)
		}
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: popped %v, want %v", round, got, want)
		}
	}
}

// TestArrivalsInterleaved: pops between pushes return the earliest arrival
// still in the heap.
func TestArrivalsInterleaved(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var h arrivals
	var in []time.Duration
	for range 5000 {
		if len(in) == 0 || rng.IntN(2) == 0 {
			at := time.Duration(rng.IntN(100))
			h.push(arrival{at: at})
			in = append(in, at)
			continue
		}
		least := slices.Min(in)
		if got := h.pop().at; got != least {
			t.Fatalf("popped %v, the earliest in the heap is %v", got, least)
		}
		in = slices.Delete(in, slices.Index(in, least), slices.Index(in, least)+1)
	}
}
