package sim

import (
	"github.com/stargate-llm/stargate/internal/mix"
	"github.com/stargate-llm/stargate/workload"
)

func (s *simulation) sessionArrive() {
	ss := s.newSession(s.rng)
	s.q.push(event{at: s.arrivals.Next(s.now), kind: evSessionArrive})
	s.nextTurn(ss)
}

// clientArrive starts a new session for closed-loop client c.
func (s *simulation) clientArrive(c uint64) {
	ss := s.newSession(s.rng)
	ss.client = c
	s.nextTurn(ss)
}

// countCompletion counts a closed-loop turn that completed in the window.
func (s *simulation) countCompletion(a *attempt) {
	cr := s.closed
	late := !a.sess.turn.Record.Good(s.cfg.Client.TTFTSLO)
	if late {
		cr.Late++
	}
	if a.preempt > 0 {
		cr.Preempted++
	}
	if late || a.preempt > 0 {
		cr.Degraded++
	}
}

// requestArrive starts the open loop's next request as a turn of its own,
// or holds it while the turn before it in its conversation is in flight.
func (s *simulation) requestArrive() {
	r := s.pending
	s.pending = s.stream.Next()
	s.q.push(event{at: s.lead + s.pending.At, kind: evSessionArrive})
	if r.Follows && s.busy[r.Session] > 0 {
		s.held[r.Session] = append(s.held[r.Session], r)
		return
	}
	s.startRequest(r)
}

// startRequest sends a request of the open loop now. A class's session
// keeps one region and router, chosen by a hash of its key.
func (s *simulation) startRequest(r workload.Request) {
	if r.Follows {
		s.busy[r.Session]++
	}
	s.nextSess++
	h := mix.Mix64(r.Session ^ s.clientSeed)
	region := s.regions[h%uint64(len(s.regions))]
	rs := s.byRegion[region]
	ss := &session{id: s.nextSess, key: r.Session, fresh: r.Fresh, follows: r.Follows, region: region, router: rs[(h>>32)%uint64(len(rs))]}
	s.sessions.put(ss.id, ss)
	s.startTurn(ss, r.Turn)
}

// requestEnded lets the next turn of an open-loop conversation go.
func (s *simulation) requestEnded(ss *session) {
	if !ss.follows {
		return
	}
	k := ss.key
	if s.busy[k]--; s.busy[k] > 0 {
		return
	}
	delete(s.busy, k)
	if q := s.held[k]; len(q) > 0 {
		next := q[0]
		if len(q) == 1 {
			delete(s.held, k)
		} else {
			s.held[k] = q[1:]
		}
		s.startRequest(next)
	}
}

// traceArrive starts the next trace request: a session of one turn.
// Its router key is a hash of its first two block ids, so that requests that
// share a prefix share an affinity policy's choice (two, because traces
// often start every prompt with one common system-prompt block: in the
// Mooncake conversation trace all 12,031 requests share their first block,
// and at most 43 their first two); without block ids, its own id.
func (s *simulation) traceArrive() {
	req := &s.cfg.Requests[s.nextReq]
	s.nextReq++
	s.nextSess++
	region := s.regions[s.rng.IntN(len(s.regions))]
	rs := s.byRegion[region]
	ss := &session{id: s.nextSess, key: s.nextSess, req: req, reqIndex: s.nextReq - 1, region: region, router: rs[s.rng.IntN(len(rs))]}
	if h := req.BlockHashes; len(h) > 0 {
		ss.key = mix.Mix64(h[0])
		if len(h) > 1 {
			ss.key = mix.Mix64(ss.key ^ h[1])
		}
	}
	s.sessions.put(ss.id, ss)
	if s.now >= s.cfg.Warmup {
		ss.measured = true
		s.live++
	}
	s.pushRequest()
	s.startTurn(ss, workload.Turn{PromptTokens: req.InputTokens, OutputTokens: max(req.OutputTokens, 1)})
}

// pushRequest schedules the next open-loop request if it arrives before the
// end of the measured window.
func (s *simulation) pushRequest() {
	if s.nextReq < len(s.cfg.Requests) {
		if at := s.cfg.Requests[s.nextReq].Arrival; at < s.arrivalsEnd {
			s.q.push(event{at: at, kind: evSessionArrive})
			return
		}
	}
	s.nextReq = len(s.cfg.Requests) // no more arrivals
}

// nextSent is the number of open-loop requests that arrived.
func (s *simulation) nextSent() int { return int(s.nextSess) }
