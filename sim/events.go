package sim

import (
	"time"

	"github.com/stargate-llm/stargate/client"
)

// eventKind says what an event is, and so which of its fields it uses.
type eventKind uint8

// Event kinds, in priority order: at the same instant an engine step ends
// before stats are delivered, stats before arrivals, arrivals before timers
// and client-side events.
const (
	evWorker           eventKind = iota // worker's step ends: backend, worker
	evStatsEmit                         // backend's gateway sends stats: backend
	evStatsDeliver                      // backend's stats reach region: backend, region
	evGatewayArrive                     // attempt id reaches its backend's gateway
	evRouterArrive                      // attempt id reaches its router
	evRouterTimer                       // router's deadline: router
	evSessionArrive                     // the arrival source's next arrival (id: a closed-loop client)
	evTurnStart                         // session id's next turn
	evAttemptStart                      // session id's next attempt at its turn
	evClientFirstToken                  // attempt id's first token reaches its client
	evClientDone                        // attempt id's answer ends at its client
	evClientError                       // attempt id fails at its client: failure
	evAttemptTimeout                    // attempt id's deadline
	evWarmupEnd                         // the warm-up ends
	// Telemetry and faults (none in a run without them).
	evFault     // fault starts (or ends, with ending)
	evTelemetry // backend's telemetry report
	evProbe     // router probes every backend
	evBurst     // burst fault's sessions arrive
	// A refusal before the first byte on its way back to the router:
	// attempt id, failure, neverSent.
	evRouterRefused
)

// event is one thing that happens at an instant; its kind says which fields
// it uses. It holds no pointer, so writing events to the queue's slab needs
// no GC write barrier and the collector never scans the slab.
type event struct {
	at time.Duration
	// key orders simultaneous events: kind in the top byte, then the
	// sequence number of the push.
	key uint64
	// id is the attempt, the session (evTurnStart, evAttemptStart) or the
	// closed-loop client (evSessionArrive).
	id      uint64
	backend int32
	worker  int32
	router  int32
	region  int32
	fault   int32 // index in Config.Faults
	failure client.Failure
	// neverSent: a refused connection (evRouterRefused); ending: the fault
	// ends (evFault).
	neverSent, ending bool
	kind              eventKind
}

// Constructors of the events that name more than an attempt or a session.

func workerEvent(at time.Duration, b, w int) event {
	return event{at: at, kind: evWorker, backend: int32(b), worker: int32(w)}
}

func statsEmitEvent(at time.Duration, b int) event {
	return event{at: at, kind: evStatsEmit, backend: int32(b)}
}

func deliverEvent(at time.Duration, b, region int) event {
	return event{at: at, kind: evStatsDeliver, backend: int32(b), region: int32(region)}
}

func routerTimerEvent(at time.Duration, r int) event {
	return event{at: at, kind: evRouterTimer, router: int32(r)}
}

// clientError fails attempt id at its client with f.
func clientError(at time.Duration, id uint64, f client.Failure) event {
	return event{at: at, kind: evClientError, id: id, failure: f}
}

func refusedEvent(at time.Duration, id uint64, f client.Failure, neverSent bool) event {
	return event{at: at, kind: evRouterRefused, id: id, failure: f, neverSent: neverSent}
}

func faultEvent(at time.Duration, i int, ending bool) event {
	return event{at: at, kind: evFault, fault: int32(i), ending: ending}
}

func burstEvent(at time.Duration, i int) event {
	return event{at: at, kind: evBurst, fault: int32(i)}
}

func telemetryEvent(at time.Duration, b int) event {
	return event{at: at, kind: evTelemetry, backend: int32(b)}
}

func probeEvent(at time.Duration, r int) event {
	return event{at: at, kind: evProbe, router: int32(r)}
}
