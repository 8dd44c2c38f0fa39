package gateway

import (
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// SetAdmissible tells the gateway how many of its workers can take a
// request now: the others are quarantined or unreachable. Capacity shrinks
// in proportion (rounded up while any worker is admissible) and is zero
// with none: Offer then rejects at once, and every stats message reports
// the backend Loading, which no router places on, until a worker is back.
// A grown capacity admits waiting requests, appended to out.
func (g *Gateway) SetAdmissible(now time.Duration, workers int, out []Request) []Request {
	workers = min(max(workers, 0), g.workers)
	if workers == g.admissible {
		return out
	}
	g.admissible = workers
	g.capacity = (g.full*workers + g.workers - 1) / g.workers
	g.changed(now)
	return g.admitWaiting(now, out)
}

// Admissible is the number of workers that can take a request.
func (g *Gateway) Admissible() int { return g.admissible }

// notAdmitting is the report of a backend with no admissible worker: its
// last report, or an empty one, in state Loading.
func (g *Gateway) notAdmitting() *telemetry.Signals {
	var c telemetry.Signals
	if g.signals != nil {
		c = *g.signals
	}
	c.State = telemetry.Loading
	return &c
}

// AwaitFirstToken records that admitted request id was handed to the engine
// at now and has not had its first token yet; FirstToken clears it. Only
// requests so marked count toward the TTFT floor, so a caller that does not
// track first tokens (the simulator) sees only its queue.
func (g *Gateway) AwaitFirstToken(now time.Duration, id uint64) {
	if _, ok := g.active[id]; ok {
		g.unanswered[id] = now
	}
}

// FirstToken records that request id had its first token.
func (g *Gateway) FirstToken(id uint64) { delete(g.unanswered, id) }

// OldestUnanswered is how long the oldest request still without a first
// token has waited at now: the head of the queue, or an admitted request
// marked by AwaitFirstToken. Zero when there is none.
func (g *Gateway) OldestUnanswered(now time.Duration) time.Duration {
	var oldest time.Duration
	if len(g.waiting) > 0 {
		oldest = now - g.waiting[0].queued
	}
	for _, at := range g.unanswered {
		oldest = max(oldest, now-at)
	}
	return max(oldest, 0)
}

// withTTFTFloor raises a report's TTFT p95 to the age of the oldest request
// still without a first token. A p95 measured over the first tokens of an
// interval says nothing when none came: a stalled engine with a full queue
// would read 0, the best value, exactly when things are worst. The age of
// what waits is a lower bound of the TTFT those requests will see.
func (g *Gateway) withTTFTFloor(now time.Duration, sig *telemetry.Signals) *telemetry.Signals {
	floor := g.OldestUnanswered(now)
	if sig == nil || floor <= sig.TTFTP95 {
		return sig
	}
	c := *sig
	c.TTFTP95 = floor
	return &c
}
