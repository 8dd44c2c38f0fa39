package router

import (
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
)

// Backend is what a router knows about a backend before any stats.
type Backend struct {
	Name     string
	Capacity int
}

// Outcome is a decision about a request that was waiting.
type Outcome struct {
	ID       uint64
	Decision policy.Decision
}

type waiter struct {
	id    uint64
	req   policy.Request
	until time.Duration
}

// Router is one router replica.
type Router struct {
	id         int
	pol        policy.Policy
	views      []policy.View
	lastSeq    []uint64
	dispatched []uint64
	waiters    []waiter
}

// New returns router number id (its index in the gateways' Received counts)
// placing with pol over backends, in the order pol was built with.
func New(id int, pol policy.Policy, backends []Backend) (*Router, error) {
	if len(backends) == 0 {
		return nil, fmt.Errorf("router %d: no backends", id)
	}
	r := &Router{id: id, pol: pol, views: make([]policy.View, len(backends)),
		lastSeq: make([]uint64, len(backends)), dispatched: make([]uint64, len(backends))}
	for i, b := range backends {
		if b.Capacity < 1 {
			return nil, fmt.Errorf("router %d: backend %q has capacity %d, want >= 1", id, b.Name, b.Capacity)
		}
		r.views[i] = policy.View{Index: i, Key: policy.KeyOf(b.Name), Capacity: b.Capacity, Eligible: true}
	}
	return r, nil
}

// Policy returns the router's policy.
func (r *Router) Policy() policy.Policy { return r.pol }

// Views returns the router's current views; the caller must not modify them.
func (r *Router) Views() []policy.View { return r.views }

// Waiting is the number of requests waiting at this router.
func (r *Router) Waiting() int { return len(r.waiters) }

// SetEligible marks a backend as able or unable to take new requests.
func (r *Router) SetEligible(backend int, ok bool) { r.views[backend].Eligible = ok }

// Route places a request arriving now. On Wait the router keeps the request
// and reports its fate later through OnStats or OnTimer.
func (r *Router) Route(now time.Duration, id, session uint64) policy.Decision {
	return r.RouteExcluding(now, id, session, nil)
}

// RouteExcluding is Route for a request that the backends in exclude have
// already refused (a retry before the first byte): the policy skips them.
func (r *Router) RouteExcluding(now time.Duration, id, session uint64, exclude []int) policy.Decision {
	w := waiter{id: id, req: policy.Request{Session: session, Arrived: now, QueuedAt: -1, Exclude: exclude}}
	d := r.decide(now, &w)
	if d.Kind == policy.Wait {
		r.waiters = append(r.waiters, w)
	}
	return d
}

// decide asks the policy and applies the decision to the views.
func (r *Router) decide(now time.Duration, w *waiter) policy.Decision {
	d := r.pol.Pick(now, &w.req, r.views)
	if w.req.QueuedAt >= 0 && (d.Kind != policy.Wait || d.Backend != w.req.QueuedAt) {
		r.views[w.req.QueuedAt].Queued--
		w.req.QueuedAt = -1
	}
	switch d.Kind {
	case policy.Dispatch:
		r.dispatched[d.Backend]++
		r.views[d.Backend].Pending++
	case policy.Wait:
		if w.req.QueuedAt < 0 {
			w.req.QueuedAt = d.Backend
			r.views[d.Backend].Queued++
		}
		w.until = max(d.Until, now+time.Millisecond)
	}
	return d
}

// Undispatch takes back a dispatch to backend that is known never to have
// reached its gateway (the connection was refused), so that the gateway's
// stats will never count it.
func (r *Router) Undispatch(backend int) {
	if backend >= 0 && backend < len(r.dispatched) && r.dispatched[backend] > 0 {
		r.dispatched[backend]--
		r.views[backend].Pending = max(r.views[backend].Pending-1, 0)
	}
}

// OnStats applies a gateway's stats. If the backend now has a free slot, the
// waiting requests are asked again, oldest first; the decided ones are
// appended to out.
func (r *Router) OnStats(now time.Duration, st *gateway.Stats, out []Outcome) []Outcome {
	b := st.Backend
	if b < 0 || b >= len(r.views) || st.Seq <= r.lastSeq[b] {
		return out
	}
	r.lastSeq[b] = st.Seq
	v := &r.views[b]
	v.Capacity, v.Active, v.Waiting, v.MaxInputTPS = max(st.Capacity, 1), st.Active, st.Waiting, st.MaxInputTPS
	var received uint64
	if r.id < len(st.Received) {
		received = st.Received[r.id]
	}
	v.Pending = int(r.dispatched[b] - min(received, r.dispatched[b]))
	if len(r.waiters) == 0 || !v.Free() {
		return out
	}
	return r.retry(now, false, out)
}

// NextTimer is the earliest waiting deadline; ok is false with no waiters.
func (r *Router) NextTimer() (at time.Duration, ok bool) {
	for i, w := range r.waiters {
		if i == 0 || w.until < at {
			at = w.until
		}
	}
	return at, len(r.waiters) > 0
}

// OnTimer asks again every waiting request whose deadline has passed.
func (r *Router) OnTimer(now time.Duration, out []Outcome) []Outcome {
	return r.retry(now, true, out)
}

func (r *Router) retry(now time.Duration, dueOnly bool, out []Outcome) []Outcome {
	kept := r.waiters[:0]
	for _, w := range r.waiters {
		if dueOnly && w.until > now {
			kept = append(kept, w)
			continue
		}
		d := r.decide(now, &w)
		if d.Kind == policy.Wait {
			kept = append(kept, w)
			continue
		}
		out = append(out, Outcome{ID: w.id, Decision: d})
	}
	clear(r.waiters[len(kept):])
	r.waiters = kept
	return out
}

// Cancel removes a waiting request; it reports whether it was waiting here.
func (r *Router) Cancel(id uint64) bool {
	for i, w := range r.waiters {
		if w.id == id {
			if w.req.QueuedAt >= 0 {
				r.views[w.req.QueuedAt].Queued--
			}
			r.waiters = append(r.waiters[:i], r.waiters[i+1:]...)
			return true
		}
	}
	return false
}
