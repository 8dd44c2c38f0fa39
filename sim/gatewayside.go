package sim

import (
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/cluster"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/telemetry"
)

type backendState struct {
	spec BackendSpec
	gw   *gateway.Gateway
	cl   *cluster.Backend
	// slots are the gateway's per-worker slots when they are fewer than the
	// engine's sequences (nil otherwise), views the workers as the picker
	// sees them through the slots.
	slots       *gateway.Slots
	views       []slotView
	workerTimer int // timer id of worker 0; worker w is workerTimer+w
	statsTimer  int

	fault    faultState
	ttft     telemetry.Window
	errs     telemetry.ErrorRate
	lastBusy []time.Duration
	fellBack bool
	gpus     []telemetry.GPUValues // scratch
}

func (s *simulation) gatewayArrive(id uint64) {
	a := s.attempts.get(id)
	if a == nil {
		return
	}
	bs := s.backends[a.backend]
	a.gwAt = s.now
	if s.faulted(a) {
		return
	}
	d, _ := bs.gw.Offer(s.now, gateway.Request{ID: id, Router: a.router, PromptTokens: a.sess.prompt.PromptTokens})
	defer s.markStats(a.backend)
	if a.done { // timed out on the way: the gateway sees it arrive and leave
		if d != gateway.Reject {
			_, s.admitted = bs.gw.Cancel(s.now, id, s.admitted[:0])
			s.submitAll(a.backend)
		}
		s.dropAttempt(id)
		return
	}
	switch d {
	case gateway.Admit:
		a.place = atGateway
		s.admitted = s.admitted[:0]
		s.submit(a.backend, a)
		s.submitAll(a.backend)
	case gateway.Queue:
		a.place = atGateway
	default:
		s.refuse(a, client.Rejected, false)
	}
}

// refuse sends an attempt that backend a.backend refused or dropped before
// its first byte back to its router, which may place it again
// (routerRefused); neverSent marks a refused connection.
func (s *simulation) refuse(a *attempt, f client.Failure, neverSent bool) {
	b := a.backend
	a.place = toRouter
	s.q.push(refusedEvent(s.now+s.toRouter(a, b), a.id, f, neverSent))
}

// submit hands an admitted attempt to the engine.
func (s *simulation) submit(b int, a *attempt) {
	bs := s.backends[b]
	cacheKey := a.sess.key
	if a.sess.fresh {
		cacheKey = 0 // nothing to reuse, and nothing worth keeping
	}
	r := engine.Request{ID: a.id, Session: cacheKey,
		PromptTokens: a.sess.prompt.PromptTokens, OutputTokens: a.sess.prompt.OutputTokens}
	if req := a.sess.req; req != nil {
		r.Session = 0 // no session cache: blocks, if the request names them
		if len(req.BlockHashes) > 0 {
			r.BlockHashes, r.BlockSize = req.BlockHashes, s.cfg.BlockSize
		}
	}
	if s.observer != nil {
		s.observer.admitted(s, a)
	}
	w, err := s.place(bs, r)
	if err != nil {
		// The engine can never hold it: fail the attempt at the gateway. Its
		// slot may admit a queued request, which the caller's submitAll takes.
		_, s.admitted = bs.gw.Cancel(s.now, a.id, s.admitted)
		a.place = responding
		s.q.push(clientError(s.now+s.back(a, b), a.id, client.Errored))
		return
	}
	a.worker = w
	s.scheduleWorker(b, w)
}

// slotKey signs the fences of the simulated gateways' slots (a simulated
// worker is never quarantined, so none is ever asked for).
var slotKey = []byte("stargate-sim-slots-fence-key")

// newSlots returns the per-worker slots of a backend whose gateway gives each
// worker fewer slots than its engine's sequences (nil otherwise), with the
// workers as the picker sees them through those slots.
func newSlots(cfg gateway.Config, spec BackendSpec, cl *cluster.Backend) (*gateway.Slots, []slotView, error) {
	limit := cfg.SlotsPerWorker
	if cfg.MaxConcurrency != 0 || limit >= spec.Profile.MaxSeqs {
		return nil, nil, nil // the engine's own sequence limit binds first
	}
	// No submission waits for a permit: the gateway admits at most slots x
	// workers requests, so one of them is free for each it admits.
	slots, err := gateway.NewSlots(spec.Workers, gateway.SlotsConfig{MaxInflightPerWorker: limit}, slotKey)
	if err != nil {
		return nil, nil, err
	}
	views := make([]slotView, spec.Workers)
	for w := range views {
		views[w] = slotView{Worker: cl.Worker(w), slots: slots, w: w, limit: limit}
	}
	return slots, views, nil
}

// slotView is an engine worker as the worker picker sees it behind the
// gateway's per-worker slots, as the live gateway's picker sees its workers:
// loaded by the permits it holds, full when they reach the slots' limit
// (or while it is quarantined).
type slotView struct {
	*engine.Worker
	slots    *gateway.Slots
	w, limit int
}

func (v slotView) Load() int { return v.slots.Inflight(v.w) }

func (v slotView) SeqLimit() int {
	if v.slots.Quarantined(v.w) {
		return 0
	}
	return v.limit
}

// place picks a worker of bs for r and submits it there. Behind per-worker
// slots it does what the live gateway does: the picker names the worker it
// prefers among those with a free slot, and the slots (gateway.Slots) grant
// the permit, on that worker if it has one free; the permit goes back when
// the engine finishes the request or it is cancelled (release).
func (s *simulation) place(bs *backendState, r engine.Request) (int, error) {
	if bs.slots == nil {
		return bs.cl.Submit(s.now, r)
	}
	s.ask = r // not &r: Pick reads it through an interface, so r would move to the heap
	pick := cluster.Pick(s.now, &s.ask, bs.views)
	s.ask = engine.Request{}
	g, _, err := bs.slots.Acquire(r.ID, pick)
	if err != nil {
		return -1, fmt.Errorf("sim: backend %q: %w", bs.spec.Name, err)
	}
	if err := bs.cl.Worker(g.Worker).Submit(s.now, r); err != nil {
		_, _ = bs.slots.Cancel(r.ID) // it holds the permit just granted
		return -1, err
	}
	return g.Worker, nil
}

// release returns the slot permit of request id, which left its engine (or
// is leaving it: cancelled) on backend bs.
func (s *simulation) release(bs *backendState, id uint64) {
	if bs.slots == nil {
		return
	}
	if _, err := bs.slots.Release(id, gateway.Completed); err != nil && s.err == nil {
		s.err = fmt.Errorf("sim: backend %q: %w", bs.spec.Name, err)
	}
}

// submitAll submits the requests the gateway just admitted from its queue,
// and those that the slots freed on the way admit in turn.
func (s *simulation) submitAll(b int) {
	for len(s.admitted) > 0 {
		// Two buffers in turn: submitting may admit more into the other.
		s.batch, s.admitted = s.admitted, s.batch[:0]
		for _, r := range s.batch {
			if a := s.attempts.get(r.ID); a != nil {
				s.submit(b, a)
			} else {
				_, s.admitted = s.backends[b].gw.Cancel(s.now, r.ID, s.admitted)
			}
		}
	}
}

func (s *simulation) scheduleWorker(b, w int) {
	bs := s.backends[b]
	if bs.fault.dead || bs.fault.hung {
		return
	}
	id := bs.workerTimer + w
	at, ok := bs.cl.Worker(w).NextEventAt()
	if !ok {
		s.timers.remove(id)
		return
	}
	if cur, pending := s.timers.pending(id); pending && cur.at == at {
		return
	}
	e := workerEvent(at, b, w)
	s.q.stamp(&e)
	s.timers.set(id, e)
}

func (s *simulation) workerStep(b, w int) error {
	bs := s.backends[b]
	s.engineOut = bs.cl.Worker(w).Advance(s.now, s.engineOut[:0])
	for _, ev := range s.engineOut {
		a := s.attempts.get(ev.ID)
		if a == nil {
			return fmt.Errorf("sim: engine reported unknown request %d", ev.ID)
		}
		switch ev.Kind {
		case engine.FirstToken:
			a.streaming = true
			s.q.push(event{at: s.now + s.back(a, b), kind: evClientFirstToken, id: a.id})
			if s.track {
				bs.ttft.Add(s.now, (s.now - a.gwAt).Seconds())
				bs.errs.Observe(s.now, false)
			}
		case engine.Finished:
			a.cached, a.output, a.place, a.preempt = ev.CachedTokens, ev.OutputTokens, responding, ev.Preemptions
			a.host = ev.HostTokens
			s.release(bs, ev.ID)
			s.admitted = bs.gw.Finish(s.now, ev.ID, ev.PromptTokens, s.admitted[:0])
			s.submitAll(b)
			s.q.push(event{at: s.now + s.back(a, b), kind: evClientDone, id: a.id})
			s.markStats(b)
		}
	}
	s.scheduleWorker(b, w)
	return nil
}

// cancelAttempt withdraws a timed-out attempt from wherever it is.
func (s *simulation) cancelAttempt(a *attempt) {
	switch a.place {
	case atRouter:
		s.routers[a.router].subs[a.pool].Cancel(a.id)
		s.scheduleRouterTimer(a.router)
	case atGateway:
		bs := s.backends[a.backend]
		if bs.fault.dead || bs.fault.hung {
			break // nothing there answers
		}
		var wasActive bool
		wasActive, s.admitted = bs.gw.Cancel(s.now, a.id, s.admitted[:0])
		if wasActive {
			s.release(bs, a.id)
			// Its engine holds it on the worker it was submitted to.
			if bs.cl.Worker(a.worker).Cancel(s.now, a.id) {
				s.scheduleWorker(a.backend, a.worker)
			}
		}
		s.submitAll(a.backend)
		s.markStats(a.backend)
	}
	// toRouter and toGateway: the arrival handlers see a.done and let it go.
}

func (s *simulation) markStats(b int) {
	bs := s.backends[b]
	if bs.fault.dead || bs.fault.hung {
		return
	}
	at := max(bs.gw.NextStatsAt(), s.now)
	if cur, pending := s.timers.pending(bs.statsTimer); pending && cur.at <= at {
		return
	}
	e := statsEmitEvent(at, b)
	s.q.stamp(&e)
	s.timers.set(bs.statsTimer, e)
}
