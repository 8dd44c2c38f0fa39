package sim

import (
	"slices"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
)

// routerState is one router replica: one router core per pool (one over
// every backend without pools).
type routerState struct {
	subs []*router.Router
	// r is the one router of a run without pools (runs with telemetry or
	// faults have none).
	r      *router.Router
	region int
	timer  int
	// weights are the policy's weights after its last pick (with
	// RecordDispatches, for a policy.WeightKeeper).
	weights []policy.BackendWeight
}

func (rs *routerState) waiting() int {
	n := 0
	for _, r := range rs.subs {
		n += r.Waiting()
	}
	return n
}

// poolFor is the pool of the session's current turn (see PoolFor).
func (s *simulation) poolFor(ss *session) int {
	if len(s.cfg.Pools) == 0 {
		return 0
	}
	if s.cfg.PoolRouter != nil && ss.req != nil {
		loads := s.poolLoads // nil for a router that never reads them
		clear(loads)
		for p := range loads {
			for _, b := range s.members[p] {
				loads[p].Active += s.backends[b].gw.Active()
				loads[p].Queued += s.backends[b].gw.Waiting()
			}
		}
		p, out := s.cfg.PoolRouter.Pool(s.now, ss.reqIndex, ss.prompt, loads)
		if p >= len(s.cfg.Pools) {
			return -1
		}
		if out > 0 && out < ss.prompt.OutputTokens {
			ss.prompt.OutputTokens = out
		}
		return p
	}
	return PoolFor(s.cfg.Pools, ss.prompt.PromptTokens+ss.prompt.OutputTokens)
}

// PoolFor is the pool of smallest MaxTokens that holds a request of total
// tokens (the first of equals), or -1 if none does.
func PoolFor(pools []Pool, total int) int {
	best := -1
	for p, pool := range pools {
		if total <= pool.MaxTokens && (best < 0 || pool.MaxTokens < pools[best].MaxTokens) {
			best = p
		}
	}
	return best
}

// global turns a pool router's decision into one about the fleet's backends.
func (s *simulation) global(pool int, d router.Decision) policy.Decision {
	out := policy.Decision{Kind: d.Kind, Backend: -1, Until: d.Until, Reason: d.Reason}
	if d.Kind == policy.Dispatch || d.Kind == policy.Wait {
		out.Backend = s.members[pool][d.Backend]
	}
	return out
}

// apply carries out a router's decision about attempt a.
func (s *simulation) apply(a *attempt, d policy.Decision) {
	if d.Kind == policy.Dispatch && !a.retry.Accept(router.Decision{Kind: d.Kind, Backend: router.BackendID(s.local[d.Backend])}) {
		// A retry that waited, then was placed on a backend that already
		// refused it (no other was eligible): never send it there again.
		s.routers[a.router].subs[a.pool].Undispatch(router.BackendID(s.local[d.Backend]))
		s.giveUp(a)
		return
	}
	switch d.Kind {
	case policy.Dispatch:
		a.backend, a.place, a.told = d.Backend, toGateway, false
		lat := s.cfg.Latency[s.routers[a.router].region][s.backends[d.Backend].spec.Region] + s.pathDelay(d.Backend)
		s.q.push(event{at: s.now + lat, kind: evGatewayArrive, id: a.id})
		if s.cfg.RecordDispatches {
			f := &s.backends[d.Backend].fault
			s.dispatches = append(s.dispatches, Dispatch{At: s.now, Session: a.sess.turn.Record.Session, Router: a.router, Backend: d.Backend, Tokens: a.tokens(), Model: s.modelOf(a.sess),
				Misroute: f.dead || f.hung || (f.limit > 0 && a.tokens() > f.limit)})
		}
	case policy.Wait:
		a.place = atRouter
	default:
		if a.retry.Tried() > 0 { // a retry that waited, then found no backend: the last refusal
			s.giveUp(a)
			return
		}
		a.place = responding
		s.q.push(clientError(s.now+s.cfg.ClientLatency, a.id, client.Rejected))
	}
}

// applyOutcomes carries out the decisions of pool p's router.
func (s *simulation) applyOutcomes(p int) {
	for _, o := range s.outcomes {
		if a := s.attempts.get(o.ID); a != nil && !a.done {
			s.apply(a, s.global(p, o.Decision))
		}
	}
}

// routerRefused is a refusal reaching the router, which does what the live
// router does: it hears how the attempt ended, and places it on a backend not
// yet tried while it has attempts left (for a context-length refusal, only if
// another backend fits it); otherwise the client gets the refusal. An attempt
// whose client gave up on the way (timed out) is only accounted for.
func (s *simulation) routerRefused(a *attempt, f client.Failure, neverSent bool) {
	rs := s.routers[a.router]
	s.syncRegion(rs.region)
	sub, b := rs.subs[a.pool], a.backend
	id := router.BackendID(s.local[b])
	ref := router.Refusal{Kind: router.Errored, NeverSent: neverSent}
	switch f {
	case client.Rejected:
		ref = router.Refusal{Kind: router.Overloaded}
	case client.Invalid:
		// The simulated gateway refuses it before counting it (the live one
		// counts it, then reports it done): either way nothing stays pending.
		ref = router.Refusal{Kind: router.TooLong, Uncounted: true, OthersFit: sub.OthersFitModel(id, a.tokens(), s.modelOf(a.sess))}
	}
	step := a.retry.Refused(id, ref)
	if step.Report {
		s.tellRouter(a, router.Result{Kind: ref.Kind, Tokens: a.tokens(), Limit: a.limit})
	}
	if step.Undispatch {
		sub.Undispatch(id)
	}
	if step.Disable {
		sub.Refused(id)
	}
	if a.done {
		s.dropAttempt(a.id)
		return
	}
	a.told, a.refusal = true, f
	if step.Again {
		if d := sub.Route(s.now, a.id, router.Ask{Session: a.sess.key, Tokens: a.tokens(), Exclude: a.retry.Exclude(), Again: true, Model: s.modelOf(a.sess), Blocks: traceBlocks(a.sess.req), BlockTokens: s.cfg.BlockSize}); d.Kind != policy.Reject {
			s.apply(a, s.global(a.pool, d))
			s.scheduleRouterTimer(a.router)
			s.markWeights(a.router)
			return
		}
	}
	s.giveUp(a)
}

// giveUp answers the client of an attempt with its last refusal.
func (s *simulation) giveUp(a *attempt) {
	a.place = responding
	s.q.push(clientError(s.now+s.cfg.ClientLatency, a.id, a.refusal))
}

func (s *simulation) scheduleRouterTimer(ri int) {
	rs := s.routers[ri]
	s.updateArmed(rs.region)
	var at time.Duration
	ok := false
	for _, r := range rs.subs {
		if t, has := r.NextTimer(); has && (!ok || t < at) {
			at, ok = t, true
		}
	}
	if !ok {
		return // a pending timer fires and finds nothing due
	}
	if cur, pending := s.timers.pending(rs.timer); pending && cur.at <= at {
		return
	}
	e := routerTimerEvent(at, ri)
	s.q.stamp(&e)
	s.timers.set(rs.timer, e)
}

// markWeights marks ("weights", backend -1) the instant router ri's policy
// changed its weights, if the run records dispatches and the policy keeps
// weights (policy.WeightKeeper): it is called after each pick.
func (s *simulation) markWeights(ri int) {
	rs := s.routers[ri]
	if !s.cfg.RecordDispatches || rs.r == nil {
		return
	}
	wk, ok := rs.r.Policy().(policy.WeightKeeper)
	if !ok {
		return
	}
	prev := len(rs.weights)
	rs.weights = wk.LastWeights(rs.weights)
	now := rs.weights[prev:]
	if prev > 0 && !slices.EqualFunc(rs.weights[:prev], now, func(a, b policy.BackendWeight) bool { return a.Weight == b.Weight }) {
		s.marks = append(s.marks, Mark{At: s.now, Backend: -1, What: "weights"})
	}
	rs.weights = rs.weights[:copy(rs.weights, now)]
}
