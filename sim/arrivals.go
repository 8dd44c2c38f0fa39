package sim

import (
	"fmt"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/internal/mix"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/workload"
)

// source is where a run's turns come from: one type per arrival mode
// (sessions arriving at a rate, a closed loop of clients, a workload class's
// open loop, a trace's requests). Each evSessionArrive event is its next
// arrival.
type source interface {
	// start schedules the first arrivals.
	start(s *simulation)
	// arrive handles an evSessionArrive event.
	arrive(s *simulation, e event)
	// ended hears that session ss ended: its last turn ended, one of its
	// turns failed for good, or (one request) its turn ended.
	ended(s *simulation, ss *session)
	// drained reports that the run may stop: every measured turn has ended.
	drained() bool
	// report adds the mode's part to res, given the fleet's engine totals
	// over [from, to), the span that window returned.
	report(s *simulation, res *Result, fleet engine.Totals)
	// window is the span the engine figures cover, for a run that stopped
	// at stoppedAt.
	window(s *simulation) (from, to time.Duration)
}

// newSource builds the arrival source cfg asks for and adjusts the run's
// end and collector to it.
func newSource(s *simulation) (source, error) {
	cfg := s.cfg
	switch {
	case cfg.Requests != nil:
		tr := &traceReplay{n: len(cfg.Requests), arrivalsEnd: s.end}
		s.coll.SampleStarts()
		// Every measured turn ends within its attempts' timeouts and backoffs.
		c := cfg.Client
		s.end += time.Duration(c.MaxAttempts)*(c.AttemptTimeout+time.Duration(c.MaxAttempts)*c.RetryBackoff) + time.Second
		return tr, nil
	case cfg.Class != nil:
		st, err := cfg.Class.Stream(cfg.RPS, subSeed(cfg.Seed, streamClass))
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		return &classLoop{stream: st, pending: st.Next(), clientSeed: subSeed(cfg.Seed, streamClients), lead: cfg.Class.Lead,
			busy: map[uint64]int{}, held: map[uint64][]workload.Request{}}, nil
	case cfg.Clients > 0:
		return &closedLoop{res: ClosedResult{Clients: cfg.Clients}}, nil
	default:
		arr, err := workload.NewArrivals(cfg.Workload.SessionRate(cfg.RPS), s.rng)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		return &poissonSessions{arrivals: arr}, nil
	}
}

// runWindow is the engine figures' span of a run whose sources do not
// drain: the whole run.
func runWindow(s *simulation) (from, to time.Duration) { return 0, s.end }

// poissonSessions: sessions of the session model (Config.Workload) arrive
// at the rate that gives Config.RPS turns per second.
type poissonSessions struct {
	arrivals *workload.Arrivals
}

func (p *poissonSessions) start(s *simulation) {
	s.q.push(event{at: p.arrivals.Next(0), kind: evSessionArrive})
}

func (p *poissonSessions) arrive(s *simulation, _ event) {
	ss := s.newSession(s.rng)
	s.q.push(event{at: p.arrivals.Next(s.now), kind: evSessionArrive})
	s.nextTurn(ss)
}

func (p *poissonSessions) ended(*simulation, *session)                { /* the next arrival is already set */ }
func (p *poissonSessions) drained() bool                              { return false }
func (p *poissonSessions) report(*simulation, *Result, engine.Totals) {}
func (p *poissonSessions) window(s *simulation) (from, to time.Duration) {
	return runWindow(s)
}

// closedLoop: Config.Clients clients each run one session at a time (see
// Config.Clients). Its figures (ClosedResult) cover the measured window.
type closedLoop struct {
	res ClosedResult
	// queueS are the gateway queue times of the window's admissions.
	queueS   []float64
	queueSum float64
}

func (c *closedLoop) start(s *simulation) {
	for i := range s.cfg.Clients {
		s.q.push(event{at: time.Duration(s.rng.Int64N(int64(time.Second))), kind: evSessionArrive, id: uint64(i) + 1})
	}
	if s.cfg.Warmup > 0 {
		s.q.push(event{at: s.cfg.Warmup, kind: evWarmupEnd})
	}
}

// arrive starts a new session for the event's client.
func (c *closedLoop) arrive(s *simulation, e event) {
	ss := s.newSession(s.rng)
	ss.client = e.id
	s.nextTurn(ss)
}

// ended starts the client's next session after a think time.
func (c *closedLoop) ended(s *simulation, ss *session) {
	if ss.client > 0 {
		s.q.push(event{at: s.now + ss.ws.ThinkTime(), kind: evSessionArrive, id: ss.client})
	}
}

func (c *closedLoop) drained() bool { return false }

// turnObserver hears of admissions and completions (a closed loop's
// figures).
type turnObserver interface {
	admitted(s *simulation, a *attempt)
	completed(s *simulation, a *attempt)
}

func (c *closedLoop) window(s *simulation) (from, to time.Duration) { return s.cfg.Warmup, s.end }

// admitted counts an attempt's gateway queue time when its gateway hands it
// to the engine in the window.
func (c *closedLoop) admitted(s *simulation, a *attempt) {
	if s.now >= s.cfg.Warmup {
		q := (s.now - a.gwAt).Seconds()
		c.queueS = append(c.queueS, q)
		c.queueSum += q
	}
}

// completed counts a turn that completed in the window.
func (c *closedLoop) completed(s *simulation, a *attempt) {
	if s.now < s.cfg.Warmup {
		return
	}
	cr := &c.res
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

func (c *closedLoop) report(_ *simulation, res *Result, fleet engine.Totals) {
	cr := &c.res
	cr.Admitted, cr.Steps = len(c.queueS), fleet.Steps
	if cr.Admitted > 0 {
		cr.GatewayQueueMeanS = c.queueSum / float64(cr.Admitted)
		slices.Sort(c.queueS)
		cr.GatewayQueueP95S = metrics.Percentile(c.queueS, 0.95)
	}
	if fleet.Steps > 0 {
		cr.MeanStepS = fleet.BusyTime.Seconds() / float64(fleet.Steps)
	}
	res.Closed = cr
}

// classLoop: a workload class's open loop (Config.Class) at Config.RPS
// requests/s, each request a turn of its own.
type classLoop struct {
	stream *workload.Stream
	// pending is the next request.
	pending    workload.Request
	clientSeed uint64
	lead       time.Duration // the class's Lead: its time zero on our clock
	// busy counts the turns in flight per conversation of a class whose
	// turns follow each other, and held keeps the turns that wait for them.
	busy map[uint64]int
	held map[uint64][]workload.Request
}

func (c *classLoop) start(s *simulation) {
	s.q.push(event{at: c.lead + c.pending.At, kind: evSessionArrive})
}

// arrive starts the open loop's next request as a turn of its own, or holds
// it while the turn before it in its conversation is in flight.
func (c *classLoop) arrive(s *simulation, _ event) {
	r := c.pending
	c.pending = c.stream.Next()
	s.q.push(event{at: c.lead + c.pending.At, kind: evSessionArrive})
	if r.Follows && c.busy[r.Session] > 0 {
		c.held[r.Session] = append(c.held[r.Session], r)
		return
	}
	c.startRequest(s, r)
}

// startRequest sends a request of the open loop now. A class's session
// keeps one region and router, chosen by a hash of its key.
func (c *classLoop) startRequest(s *simulation, r workload.Request) {
	if r.Follows {
		c.busy[r.Session]++
	}
	s.nextSess++
	h := mix.Mix64(r.Session ^ c.clientSeed)
	region := s.regions[h%uint64(len(s.regions))]
	rs := s.byRegion[region]
	ss := &session{id: s.nextSess, key: r.Session, fresh: r.Fresh, follows: r.Follows, region: region, router: rs[(h>>32)%uint64(len(rs))]}
	s.sessions.put(ss.id, ss)
	s.startTurn(ss, r.Turn)
}

// ended lets the next turn of the request's conversation go.
func (c *classLoop) ended(s *simulation, ss *session) {
	if !ss.follows {
		return
	}
	k := ss.key
	if c.busy[k]--; c.busy[k] > 0 {
		return
	}
	delete(c.busy, k)
	if q := c.held[k]; len(q) > 0 {
		next := q[0]
		if len(q) == 1 {
			delete(c.held, k)
		} else {
			c.held[k] = q[1:]
		}
		c.startRequest(s, next)
	}
}

func (c *classLoop) drained() bool                              { return false }
func (c *classLoop) report(*simulation, *Result, engine.Totals) {}
func (c *classLoop) window(s *simulation) (from, to time.Duration) {
	return runWindow(s)
}

// traceReplay: each request of Config.Requests is one turn sent at its
// arrival time; the run drains once every measured turn has ended.
type traceReplay struct {
	// next is the next request to arrive (n: none left), live the measured
	// turns not yet ended, arrivalsEnd when arrivals stop.
	next, n     int
	live        int
	arrivalsEnd time.Duration
}

func (t *traceReplay) start(s *simulation) {
	t.push(s)
	if s.cfg.Warmup > 0 {
		s.q.push(event{at: s.cfg.Warmup, kind: evWarmupEnd})
	}
}

// push schedules the next request if it arrives before the end of the
// measured window.
func (t *traceReplay) push(s *simulation) {
	if t.next < len(s.cfg.Requests) {
		if at := s.cfg.Requests[t.next].Arrival; at < t.arrivalsEnd {
			s.q.push(event{at: at, kind: evSessionArrive})
			return
		}
	}
	t.next = len(s.cfg.Requests) // no more arrivals
}

// arrive starts the next trace request: a session of one turn.
// Its router key is a hash of its first two block ids, so that requests that
// share a prefix share an affinity policy's choice (two, because traces
// often start every prompt with one common system-prompt block: in the
// Mooncake conversation trace all 12,031 requests share their first block,
// and at most 43 their first two); without block ids, its own id.
func (t *traceReplay) arrive(s *simulation, _ event) {
	req := &s.cfg.Requests[t.next]
	t.next++
	s.nextSess++
	region := s.regions[s.rng.IntN(len(s.regions))]
	rs := s.byRegion[region]
	ss := &session{id: s.nextSess, key: s.nextSess, req: req, reqIndex: t.next - 1, region: region, router: rs[s.rng.IntN(len(rs))]}
	if h := req.BlockHashes; len(h) > 0 {
		ss.key = mix.Mix64(h[0])
		if len(h) > 1 {
			ss.key = mix.Mix64(ss.key ^ h[1])
		}
	}
	s.sessions.put(ss.id, ss)
	if s.now >= s.cfg.Warmup {
		ss.measured = true
		t.live++
	}
	t.push(s)
	s.startTurn(ss, workload.Turn{PromptTokens: req.InputTokens, OutputTokens: max(req.OutputTokens, 1)})
}

func (t *traceReplay) ended(_ *simulation, ss *session) {
	if ss.measured {
		t.live--
	}
}

func (t *traceReplay) drained() bool { return t.live == 0 && t.next >= t.n }

// window covers the measured part only: from the end of the warm-up to the
// end of the drain.
func (t *traceReplay) window(s *simulation) (from, to time.Duration) {
	return min(s.cfg.Warmup, s.stoppedAt), s.stoppedAt
}

func (t *traceReplay) report(s *simulation, res *Result, _ engine.Totals) {
	res.Open = &OpenResult{Sent: int(s.nextSess), EndS: s.stoppedAt.Seconds()}
}
