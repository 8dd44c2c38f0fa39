package sim

import (
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/workload"
)

// where an attempt is.
type place uint8

const (
	toRouter place = iota
	atRouter
	toGateway
	atGateway // queued or in the engine
	responding
	lost // swallowed by a hung backend
)

type attempt struct {
	id      uint64
	sess    *session
	router  int
	pool    int
	backend int
	place   place
	done    bool
	cached  int
	host    int // of cached, prompt tokens its engine loaded from the host tier
	output  int
	gwAt    time.Duration // arrival at the gateway
	preempt int           // times the engine preempted it
	worker  int           // the backend's worker its engine runs it on, once submitted
	limit   int           // the context limit a refusal named
	// retry holds the backends that refused it before its first byte (by
	// their IDs at its pool's router); told is set once its router has
	// heard how the last of them ended.
	retry   router.Retry
	told    bool
	refusal client.Failure // the last refusal's kind
	// streaming: its engine has sent the first token, so a failure now
	// reaches the client (an SSE error), not the router.
	streaming bool
}

// session is a conversation of the session model (ws started), or one request
// of a trace or a class's open loop.
type session struct {
	id uint64
	// key identifies the conversation to routers and prefix caches: id in
	// the session model, the class's session in an open loop, a hash of a
	// trace request's leading block ids.
	key uint64
	req *workload.TraceRequest
	// reqIndex is req's index in Config.Requests.
	reqIndex int
	// measured: a trace turn that arrived in the window; the run drains
	// until none is left.
	measured bool
	fresh    bool // the prompt shares no prefix with the session's earlier ones
	follows  bool // the conversation's next turn waits for this one
	// ws is the session model's conversation, held inline: a turn reads
	// its random stream, which would otherwise be one more cache miss per
	// turn in a fleet of many sessions.
	ws     workload.Session
	client uint64 // closed loop: its client (1-based); 0 for none
	region int
	router int
	turn   client.Turn
	prompt workload.Turn
}

// newSession creates a session in a region and router drawn from rng.
func (s *simulation) newSession(rng *rand.Rand) *session {
	s.nextSess++
	region := s.regions[rng.IntN(len(s.regions))]
	rs := s.byRegion[region]
	ss := &session{id: s.nextSess, key: s.nextSess, region: region, router: rs[rng.IntN(len(rs))]}
	s.cfg.Workload.StartSession(&ss.ws, s.sessionSeed, s.nextSess)
	if s.cfg.LiveSessionKeys {
		ss.key = router.SessionIDKey(strconv.FormatUint(ss.id, 10))
	}
	s.sessions.put(ss.id, ss)
	return ss
}

func (s *simulation) nextTurn(ss *session) {
	t, ok := ss.ws.Next()
	if !ok {
		s.endSession(ss) // a closed-loop client starts its next session
		return
	}
	s.startTurn(ss, t)
}

func (s *simulation) startTurn(ss *session, t workload.Turn) {
	ss.prompt = t
	session := ss.key
	if ss.req != nil || s.cfg.LiveSessionKeys {
		session = ss.id // a trace request's key is shared by the requests of one prefix
	}
	ss.turn = s.cfg.Client.NewTurn(s.now, metrics.TurnRecord{Session: session, Turn: t.Index, Region: ss.region,
		Router: ss.router, PromptTokens: t.PromptTokens})
	s.coll.TurnStarted(s.now)
	s.sendAttempt(ss)
}

func (s *simulation) sendAttempt(ss *session) {
	s.nextID++
	var a *attempt
	if n := len(s.freeAttempts); n > 0 {
		a = s.freeAttempts[n-1]
		s.freeAttempts = s.freeAttempts[:n-1]
	} else {
		a = new(attempt)
	}
	*a = attempt{id: s.nextID, sess: ss, router: ss.router, backend: -1, retry: router.NewRetry(s.cfg.RouterAttempts, nil)}
	s.attempts.put(a.id, a)
	deadline := ss.turn.Attempt(s.now)
	s.q.push(event{at: s.now + s.cfg.ClientLatency, kind: evRouterArrive, id: a.id})
	timeout := event{at: deadline, kind: evAttemptTimeout, id: a.id}
	s.q.stamp(&timeout)
	s.timeouts.push(timeout)
}

// back is the latency of a response from backend b to the client of attempt a.
func (s *simulation) back(a *attempt, b int) time.Duration {
	return s.toRouter(a, b) + s.cfg.ClientLatency
}

// toRouter is the latency of a message from backend b to the router of
// attempt a.
func (s *simulation) toRouter(a *attempt, b int) time.Duration {
	return s.cfg.Latency[s.backends[b].spec.Region][s.routers[a.router].region] + s.pathDelay(b)
}

func (s *simulation) failAttempt(a *attempt, f client.Failure) {
	a.done = true
	ss := a.sess
	retryAt, retry := ss.turn.Fail(s.now, f, a.backend)
	s.endAttempt(a)
	if retry {
		s.q.push(event{at: retryAt, kind: evAttemptStart, id: ss.id})
		return
	}
	s.coll.Add(ss.turn.Record)
	s.endSession(ss) // a turn that fails after all its attempts ends its session
}

func (s *simulation) endAttempt(a *attempt) {
	if a.place == toRouter || a.place == toGateway {
		return // still referenced by an arrival in flight, which removes nothing
	}
	s.dropAttempt(a.id)
}

func (s *simulation) endTurn(ss *session) {
	s.coll.Add(ss.turn.Record)
	if !ss.ws.Started() { // one request of a trace or a class's open loop
		s.endSession(ss)
		return
	}
	s.q.push(event{at: s.now + ss.ws.ThinkTime(), kind: evTurnStart, id: ss.id})
}

// endSession removes a session (one of a class's or a trace's requests is a
// turn that ended) and tells the arrival source (a closed-loop client starts
// its next session after a think time).
func (s *simulation) endSession(ss *session) {
	s.sessions.del(ss.id)
	s.src.ended(s, ss)
}

// dropAttempt forgets attempt id. Its memory serves a later attempt, from
// the next event on: nothing holds an attempt past the event that drops it
// (events, outcomes and the gateways name attempts by id), and a new one
// then reuses memory the cache is likely to still hold.
func (s *simulation) dropAttempt(id uint64) {
	if a := s.attempts.get(id); a != nil {
		s.attempts.del(id)
		s.droppedAttempts = append(s.droppedAttempts, a)
	}
}

// recycleAttempts makes the attempts dropped during the last event
// available to sendAttempt.
func (s *simulation) recycleAttempts() {
	s.freeAttempts = append(s.freeAttempts, s.droppedAttempts...)
	clear(s.droppedAttempts)
	s.droppedAttempts = s.droppedAttempts[:0]
}
