package sim

import (
	"time"

	"github.com/stargate-llm/stargate/gateway"
)

type eventKind uint8

// Event kinds, in priority order: at the same instant an engine step ends
// before stats are delivered, stats before arrivals, arrivals before timers
// and client-side events.
const (
	evWorker eventKind = iota
	evStatsEmit
	evStatsDeliver
	evGatewayArrive
	evRouterArrive
	evRouterTimer
	evSessionArrive
	evTurnStart
	evAttemptStart
	evClientFirstToken
	evClientDone
	evClientError
	evAttemptTimeout
)

type event struct {
	at    time.Duration
	seq   uint64
	kind  eventKind
	a, b  int32 // backend/worker, router, region, ...
	id    uint64
	stats *gateway.Stats
}

func (e *event) less(o *event) bool {
	if e.at != o.at {
		return e.at < o.at
	}
	if e.kind != o.kind {
		return e.kind < o.kind
	}
	return e.seq < o.seq
}

// eventQueue is a binary min-heap ordered by (time, kind, sequence number), so
// the order of simultaneous events is fixed and runs are reproducible.
type eventQueue struct {
	items []event
	seq   uint64
}

func (q *eventQueue) push(e event) {
	q.seq++
	e.seq = q.seq
	q.items = append(q.items, e)
	i := len(q.items) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.items[i].less(&q.items[p]) {
			break
		}
		q.items[i], q.items[p] = q.items[p], q.items[i]
		i = p
	}
}

func (q *eventQueue) pop() event {
	top := q.items[0]
	last := len(q.items) - 1
	q.items[0] = q.items[last]
	q.items[last] = event{}
	q.items = q.items[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(q.items) {
			break
		}
		m := l
		if r := l + 1; r < len(q.items) && q.items[r].less(&q.items[l]) {
			m = r
		}
		if !q.items[m].less(&q.items[i]) {
			break
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
	return top
}

func (q *eventQueue) len() int { return len(q.items) }
