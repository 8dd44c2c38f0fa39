package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSeqQueueMatchesSlice: a seeded random mix of the queue's operations,
// across growths and wraps of its ring, keeps the same entries in the same
// order as a plain slice doing the same.
func TestSeqQueueMatchesSlice(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var q seqQueue
	var model []seq
	next := uint64(0)
	for op := range 20_000 {
		switch k := rng.IntN(10); {
		case k < 4:
			next++
			q.pushBack(seq{id: next})
			model = append(model, seq{id: next})
		case k < 5:
			next++
			q.pushFront(seq{id: next})
			model = slices.Insert(model, 0, seq{id: next})
		case k < 8 && len(model) > 0:
			if got := q.popFront(); got.id != model[0].id {
				t.Fatalf("op %d: popped %d, want %d", op, got.id, model[0].id)
			}
			model = model[1:]
		case len(model) > 0:
			i := rng.IntN(len(model))
			q.remove(i)
			model = slices.Delete(model, i, i+1)
		}
		if q.len() != len(model) {
			t.Fatalf("op %d: %d entries, want %d", op, q.len(), len(model))
		}
		for i := range model {
			if q.at(i).id != model[i].id {
				t.Fatalf("op %d: entry %d is %d, want %d", op, i, q.at(i).id, model[i].id)
			}
		}
	}
}
