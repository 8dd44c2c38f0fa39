package router

import (
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// DefaultMaxAttempts is how many backends a router tries for one request
// before its first byte (a refused connection, an overload answer or a
// context-length refusal moves it to a backend not yet tried); the live
// router and the simulator's routers both default to it.
const DefaultMaxAttempts = 3

// Backend is what a router knows about a backend before any stats.
type Backend struct {
	Name     string
	Capacity int
	// MaxModelLen is the backend's limit from /v1/models; zero: unknown.
	MaxModelLen int
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
	cfg        Config
	pol        policy.Policy
	names      []string
	views      []policy.View
	lastSeq    []uint64
	dispatched []uint64
	waiters    []waiter
	life       []lifecycle
	capAware   bool
	hidden     []int // scratch: backends hidden from one pick by the capability filter
}

// New returns router number id (its index in the gateways' Received counts)
// placing with pol over backends, in the order pol was built with. It tracks
// no liveness: every backend is Ready until told otherwise (NewWith).
func New(id int, pol policy.Policy, backends []Backend) (*Router, error) {
	return NewWith(id, pol, backends, Config{})
}

// NewWith is New with a configuration. The router's clock starts at 0: a
// backend not heard from by HeartbeatTTL is Failed.
func NewWith(id int, pol policy.Policy, backends []Backend, cfg Config) (*Router, error) {
	if len(backends) == 0 {
		return nil, fmt.Errorf("router %d: no backends", id)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router %d: %w", id, err)
	}
	r := &Router{id: id, cfg: cfg, pol: pol, names: make([]string, len(backends)), views: make([]policy.View, len(backends)),
		lastSeq: make([]uint64, len(backends)), dispatched: make([]uint64, len(backends)), life: make([]lifecycle, len(backends))}
	if ca, ok := pol.(policy.CapabilityAware); ok && ca.CapabilityAware() {
		r.capAware = true
	}
	for i, b := range backends {
		if b.Capacity < 1 {
			return nil, fmt.Errorf("router %d: backend %q has capacity %d, want >= 1", id, b.Name, b.Capacity)
		}
		if b.MaxModelLen < 0 {
			return nil, fmt.Errorf("router %d: backend %q has max_model_len %d, want >= 0 (0: unknown)", id, b.Name, b.MaxModelLen)
		}
		r.names[i] = b.Name
		r.views[i] = policy.View{Index: i, Key: policy.KeyOf(b.Name), Capacity: b.Capacity, Eligible: true,
			State: telemetry.Ready, MaxModelLen: b.MaxModelLen}
		r.life[i] = lifecycle{adminOK: true, state: telemetry.Ready, advertised: b.MaxModelLen,
			errs: telemetry.ErrorRate{HalfLife: cfg.errorHalfLife()}, path: telemetry.PathEstimator{Stale: cfg.PathStale}}
	}
	return r, nil
}

// Policy returns the router's policy.
func (r *Router) Policy() policy.Policy { return r.pol }

// Views returns the router's current views; the caller must not modify them.
func (r *Router) Views() []policy.View { return r.views }

// Waiting is the number of requests waiting at this router.
func (r *Router) Waiting() int { return len(r.waiters) }

// SetEligible marks a backend as able or unable to take new requests, on top
// of its lifecycle state (an operator's switch; Drain is the lifecycle's).
func (r *Router) SetEligible(backend int, ok bool) {
	r.life[backend].adminOK = ok
	r.views[backend].Eligible = ok && r.views[backend].State == telemetry.Ready
}

// Route places a request arriving now. On Wait the router keeps the request
// and reports its fate later through OnStats or OnTimer.
func (r *Router) Route(now time.Duration, id, session uint64) policy.Decision {
	return r.RouteWith(now, id, session, 0, nil)
}

// RouteTokens is Route for a request of tokens prompt plus output tokens
// (0: unknown), which the capability filter compares with each backend's
// max_model_len.
func (r *Router) RouteTokens(now time.Duration, id, session uint64, tokens int) policy.Decision {
	return r.RouteWith(now, id, session, tokens, nil)
}

// RouteExcluding is Route for a request that the backends in exclude have
// already refused (a retry before the first byte): the policy skips them.
func (r *Router) RouteExcluding(now time.Duration, id, session uint64, exclude []int) policy.Decision {
	return r.RouteWith(now, id, session, 0, exclude)
}

// RouteWith is Route with the request's tokens (see RouteTokens) and the
// backends that already refused it (see RouteExcluding).
func (r *Router) RouteWith(now time.Duration, id, session uint64, tokens int, exclude []int) policy.Decision {
	r.Expire(now)
	w := waiter{id: id, req: policy.Request{Session: session, Arrived: now, QueuedAt: -1, Tokens: tokens, Exclude: exclude}}
	d := r.decide(now, &w)
	if d.Kind == policy.Wait {
		r.waiters = append(r.waiters, w)
	}
	return d
}

// decide asks the policy and applies the decision to the views.
func (r *Router) decide(now time.Duration, w *waiter) policy.Decision {
	r.refreshErrors(now)
	hidden := r.hideIncapable(&w.req)
	d := r.pol.Pick(now, &w.req, r.views)
	for _, b := range hidden {
		r.views[b].Eligible = true
	}
	// The router never sends to a backend that is not Ready, whatever the
	// policy says.
	if d.Kind == policy.Dispatch && (d.Backend < 0 || d.Backend >= len(r.views) || !r.views[d.Backend].Eligible) {
		d = policy.Decision{Kind: policy.Reject, Backend: -1, Reason: fmt.Sprintf("policy %s chose backend %d, which is not eligible", r.pol.Name(), d.Backend)}
	}
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

// OthersFit reports whether a backend other than b may hold a request of
// tokens, by the limits this router knows (advertised or learned).
func (r *Router) OthersFit(b, tokens int) bool {
	for i := range r.views {
		if i != b && (r.views[i].MaxModelLen == 0 || tokens <= r.views[i].MaxModelLen) {
			return true
		}
	}
	return false
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
	r.Expire(now)
	r.lastSeq[b] = st.Seq
	v := &r.views[b]
	v.Capacity, v.Active, v.Waiting, v.MaxInputTPS = max(st.Capacity, 1), st.Active, st.Waiting, st.MaxInputTPS
	var received uint64
	if r.id < len(st.Received) {
		received = st.Received[r.id]
	}
	v.Pending = int(r.dispatched[b] - min(received, r.dispatched[b]))
	r.heard(now, b, st.Signals)
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

// OnTimer asks again every waiting request whose deadline has passed, after
// failing the backends whose heartbeat is older than the TTL.
func (r *Router) OnTimer(now time.Duration, out []Outcome) []Outcome {
	r.Expire(now)
	return r.retry(now, true, out)
}

func (r *Router) retry(now time.Duration, dueOnly bool, out []Outcome) []Outcome {
	kept := r.waiters[:0]
	for i := range r.waiters {
		w := &r.waiters[i] // in place: a copy would escape to the heap through the policy
		if dueOnly && w.until > now {
			kept = append(kept, *w)
			continue
		}
		d := r.decide(now, w)
		if d.Kind == policy.Wait {
			kept = append(kept, *w)
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
