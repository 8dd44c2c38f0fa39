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

// TestInboxDueMatchesScan: whatever the order of the arrivals (in order per
// source region, or out of order as a path delay makes them), due hands back
// exactly the backends of the arrivals by now, each once, and arrived says
// whether there is any.
func TestInboxDueMatchesScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 200 {
		var in inbox
		var pending []arrival // the naive model: every arrival not yet due
		tail := make([]time.Duration, 5)
		now := time.Duration(0)
		for step := range 400 {
			if rng.IntN(3) > 0 {
				src := rng.IntN(5)
				at := now + time.Duration(rng.IntN(50))
				if round%2 == 0 { // in order per source, as without path delays
					at = max(at, tail[src])
					tail[src] = at
				}
				a := arrival{at: at, backend: int32(rng.IntN(30))}
				in.push(src, a)
				pending = append(pending, a)
				continue
			}
			now += time.Duration(rng.IntN(20))
			var want []int32
			kept := pending[:0]
			for _, a := range pending {
				if a.at <= now {
					want = append(want, a.backend)
				} else {
					kept = append(kept, a)
				}
			}
			pending = kept
			if got := in.arrived(now); got != (len(want) > 0) {
				t.Fatalf("round %d step %d: arrived %v with %d due", round, step, got, len(want))
			}
			got := in.due(now, nil)
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d step %d: due %v, want %v", round, step, got, want)
			}
		}
	}
}

// TestDeadlinesFIFO: the ring of deadlines hands back every timeout event in
// the order pushed, across wrap-arounds and growth, and orders a deadline
// against an event as the event queue does.
func TestDeadlinesFIFO(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var d deadlines
	var q eventQueue
	var want []event
	for step := range 20000 {
		if len(want) == 0 || rng.IntN(3) > 0 || step < 3000 {
			e := event{at: time.Duration(step), kind: evAttemptTimeout, id: uint64(step)}
			q.stamp(&e)
			d.push(e)
			want = append(want, e)
			continue
		}
		if d.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, d.len(), len(want))
		}
		o := event{at: want[0].at, kind: evWorker}
		q.stamp(&o)
		if got, w := d.front().before(o.order()), want[0].order().before(o.order()); got != w {
			t.Fatalf("step %d: before = %v, less = %v", step, got, w)
		}
		if got := d.pop(); got != want[0] {
			t.Fatalf("step %d: popped %+v, want %+v", step, got, want[0])
		}
		want = want[1:]
	}
}
