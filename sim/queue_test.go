package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"
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

// refNext is the old simulation.next over the reference heap and timers.
func refNext(q *refQueue, ts *refTimers) event {
	if ts.len() > 0 && (q.len() == 0 || ts.head().before(q.head())) {
		return ts.pop()
	}
	return q.pop()
}

// TestQueueMatchesHeap: the calendar queue with its timers pops exactly what
// the old 4-ary event heap and indexed timer heap popped, in the same order,
// under random pushes, timer moves and removals, and pops, from a few
// pending events to 60,000, with many equal instants, events due at once,
// within the current bucket, across the ring and far beyond it, and gaps
// that empty the ring.
func TestQueueMatchesHeap(t *testing.T) {
	const bucket = 1 << bucketShift
	cases := []struct {
		name     string
		steps    int
		target   int           // pending events the pushes hover around
		spread   time.Duration // how far ahead an event is due (uniform)
		grain    time.Duration // instants are multiples of grain (ties)
		far      int           // 1 in far pushes is due up to 60 s ahead
		entities int
	}{
		{"tiny-ties", 20000, 5, 3 * bucket, bucket / 2, 0, 4},
		{"small", 40000, 600, 200 * time.Millisecond, 1, 20, 50},
		{"ties", 40000, 600, 20 * time.Millisecond, time.Millisecond, 10, 50},
		{"in-bucket", 40000, 300, bucket, 1, 0, 30},
		{"10x", 100000, 5500, 500 * time.Millisecond, 1000, 10, 2500},
		{"ring-edge", 60000, 2000, 8 * time.Second, 1, 3, 200},
		{"sparse", 30000, 20, 30 * time.Second, 1, 2, 10},
		{"100x", 150000, 60000, 2 * time.Second, 1, 30, 20000},
		{"burst", 60000, 20000, 0, 1, 0, 100},                 // every event due at once, at 0
		{"bucket-burst", 60000, 20000, bucket / 8, 1, 0, 100}, // near and late both long
	}
	for ci, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(ci), 11))
			var q eventQueue
			ts := timerSet{q: &q}
			ts.grow(c.entities)
			var rq refQueue
			var rts refTimers
			rts.grow(c.entities)
			now := time.Duration(0)
			due := func() time.Duration {
				d := time.Duration(rng.Int64N(int64(c.spread) + 1))
				if c.far > 0 && rng.IntN(c.far) == 0 {
					d = time.Duration(rng.Int64N(int64(60 * time.Second)))
				}
				return (now + d) / c.grain * c.grain
			}
			at := func() time.Duration { // never before now
				for {
					if a := due(); a >= now {
						return a
					}
				}
			}
			for step := range c.steps {
				if q.len() != rq.len()+rts.len() {
					t.Fatalf("step %d: len %d, want %d", step, q.len(), rq.len()+rts.len())
				}
				pending := q.len()
				switch r := rng.IntN(10); {
				case pending == 0 || (pending < c.target && r < 6) || r < 4:
					if rng.IntN(3) > 0 {
						e := event{at: at(), kind: eventKind(rng.IntN(int(evRouterRefused) + 1)), id: uint64(step), backend: int32(rng.IntN(100))}
						q.push(e)
						e.key = uint64(e.kind)<<56 | q.seq // as push stamped it
						rq.push(e)
						continue
					}
					id := rng.IntN(c.entities)
					e := workerEvent(at(), id, step)
					q.stamp(&e)
					ts.set(id, e)
					rts.set(id, e)
					if got, ok := ts.pending(id); !ok || got != e {
						t.Fatalf("step %d: pending(%d) = %+v, %v, want %+v", step, id, got, ok, e)
					}
				case r < 5:
					id := rng.IntN(c.entities)
					ts.remove(id)
					rts.remove(id)
					got, ok := ts.pending(id)
					want, wok := rts.pending(id)
					if ok || wok || got != want {
						t.Fatalf("step %d: pending(%d) after remove = %+v, %v", step, id, got, ok)
					}
				default:
					want := refNext(&rq, &rts)
					if h := q.head(); h != want.order() {
						t.Fatalf("step %d: head %+v, want %+v", step, h, want.order())
					}
					got := q.pop()
					if got != want {
						t.Fatalf("step %d: popped %+v, want %+v", step, got, want)
					}
					now = got.at
				}
			}
			for q.len() > 0 { // drain
				want := refNext(&rq, &rts)
				if got := q.pop(); got != want {
					t.Fatalf("drain: popped %+v, want %+v", got, want)
				}
			}
			if rq.len()+rts.len() != 0 {
				t.Fatalf("queue empty, reference holds %d", rq.len()+rts.len())
			}
		})
	}
}

// TestNodeSize: a slab node is one cache line.
func TestNodeSize(t *testing.T) {
	if n := unsafe.Sizeof(node{}); n != 64 {
		t.Fatalf("node is %d bytes, want 64", n)
	}
}

// BenchmarkQueue holds n pending events (about the 1x, 10x and 100x runs'
// counts), due uniformly over the next 500 ms, and pops one and pushes one
// per op: the calendar queue ("calendar") against the heap it replaced
// ("heap"). Each body is written out for its queue, so that both call
// their queue's methods directly (a generic body would call through a
// dictionary and add that to both figures); BenchmarkQueueBurst too.
func BenchmarkQueue(b *testing.B) {
	for _, n := range []int{600, 5500, 55000} {
		span := int64(500 * time.Millisecond)
		b.Run(fmt.Sprintf("calendar/%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			var q eventQueue
			for range n {
				q.push(event{at: time.Duration(rng.Int64N(span)), kind: evClientDone})
			}
			for b.Loop() {
				e := q.pop()
				q.push(event{at: e.at + time.Duration(rng.Int64N(span)), kind: evClientDone})
			}
		})
		b.Run(fmt.Sprintf("heap/%d", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			var q stampedRef
			for range n {
				q.push(event{at: time.Duration(rng.Int64N(span)), kind: evClientDone})
			}
			for b.Loop() {
				e := q.pop()
				q.push(event{at: e.at + time.Duration(rng.Int64N(span)), kind: evClientDone})
			}
		})
	}
}

// BenchmarkQueueBurst pushes k events due at the instant being popped (a
// burst of arrivals at one moment), after the bucket was sorted, then pops
// them all: the calendar queue ("calendar") against the reference 4-ary
// heap of queue_ref_test.go ("heap").
func BenchmarkQueueBurst(b *testing.B) {
	for _, k := range []int{100, 20000} {
		b.Run(fmt.Sprintf("calendar/%d", k), func(b *testing.B) {
			var q eventQueue
			for b.Loop() {
				q.push(event{at: time.Second, kind: evClientDone})
				now := q.pop().at // the bucket is sorted: what follows is filed late
				for range k {
					q.push(event{at: now, kind: evSessionArrive})
				}
				for q.len() > 0 {
					q.pop()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/event")
		})
		b.Run(fmt.Sprintf("heap/%d", k), func(b *testing.B) {
			var q stampedRef
			for b.Loop() {
				q.push(event{at: time.Second, kind: evClientDone})
				now := q.pop().at
				for range k {
					q.push(event{at: now, kind: evSessionArrive})
				}
				for q.len() > 0 {
					q.pop()
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k), "ns/event")
		})
	}
}

// stampedRef is the reference heap with its pushes stamped as
// eventQueue.push stamps them.
type stampedRef struct {
	refQueue
	seq uint64
}

func (r *stampedRef) push(e event) {
	r.seq++
	e.key = uint64(e.kind)<<56 | r.seq
	r.refQueue.push(e)
}
