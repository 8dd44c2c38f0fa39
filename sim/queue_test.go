package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestEventQueueOrder: the queue pops every event it holds in (time, kind,
// push) order, across interleaved pushes and pops with many ties, and hands
// back each event whole.
func TestEventQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var q eventQueue
	var want []event // what the queue holds, as stamped
	for step := range 30000 {
		if len(want) == 0 || rng.IntN(5) < 3 {
			e := event{at: time.Duration(step/8 + rng.IntN(50)), kind: eventKind(rng.IntN(int(evRouterRefused) + 1)),
				id: uint64(step), backend: int32(rng.IntN(100)), worker: int32(step)}
			q.push(e)
			e.key = uint64(e.kind)<<56 | q.seq // as push stamped it
			want = append(want, e)
			continue
		}
		if q.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(want))
		}
		first := slices.MinFunc(want, func(a, b event) int {
			if a.order().before(b.order()) {
				return -1
			}
			return 1
		})
		if h := q.head(); h != first.order() {
			t.Fatalf("step %d: head %+v, want %+v", step, h, first.order())
		}
		if got := q.pop(); got != first {
			t.Fatalf("step %d: popped %+v, want %+v", step, got, first)
		}
		want = slices.DeleteFunc(want, func(e event) bool { return e.key == first.key })
	}
}

// TestTimerSetOrder: the timers pop each entity's latest event in the queue's
// order, after random moves, removals and pops.
func TestTimerSetOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var q eventQueue // for stamps
	var ts timerSet
	const n = 300
	ts.grow(n)
	want := map[int]event{}
	for step := range 40000 {
		id := rng.IntN(n)
		switch r := rng.IntN(10); {
		case r < 6:
			e := event{at: time.Duration(step/4 + rng.IntN(40)), kind: evWorker, worker: int32(id)}
			q.stamp(&e)
			ts.set(id, e)
			want[id] = e
		case r < 8:
			ts.remove(id)
			delete(want, id)
		default:
			if ts.len() != len(want) {
				t.Fatalf("step %d: len %d, want %d", step, ts.len(), len(want))
			}
			if len(want) == 0 {
				continue
			}
			first, best := -1, order{}
			for i, e := range want {
				if first < 0 || e.order().before(best) {
					first, best = i, e.order()
				}
			}
			if got := ts.pop(); got != want[first] {
				t.Fatalf("step %d: popped %+v, want %+v", step, got, want[first])
			}
			delete(want, first)
		}
		if e, ok := ts.pending(id); ok != (want[id] != event{}) || e != want[id] {
			t.Fatalf("step %d: pending(%d) = %+v, %v, want %+v", step, id, e, ok, want[id])
		}
	}
}
