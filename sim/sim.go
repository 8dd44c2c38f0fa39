package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/cluster"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/internal/mix"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
)

// Random streams: each subsystem draws from generators seeded by subSeed(seed,
// stream), so no two subsystems share a stream (a session's generator is
// seeded by its id on top, a router's policy by the router's index).
const (
	streamArrivals uint64 = iota + 1
	streamSessions
	streamPolicies
	streamFaults
	streamClass   // a workload class's request shapes
	streamClients // where a class's sessions connect
)

// subSeed derives a stream's seed from the run's seed. (Mix64 adds the
// golden-ratio increment itself; subtracting it keeps the seeds, and so the
// published results, of the first version of this function.)
func subSeed(seed, stream uint64) uint64 {
	const golden = 0x9e3779b97f4a7c15
	return mix.Mix64(seed ^ stream*golden - golden)
}

type simulation struct {
	cfg      *Config
	q        eventQueue
	timers   timerSet
	now      time.Duration
	end      time.Duration
	backends []*backendState
	routers  []*routerState
	byRegion [][]int // router indices per region
	regions  []int   // regions with routers
	rng      *rand.Rand
	sessions table[session]
	nextSess uint64
	attempts table[attempt]
	nextID   uint64
	coll     *metrics.Collector
	// sessionSeed seeds every session's own generator (with its id).
	sessionSeed uint64
	events      uint64

	// timeouts holds attempt deadlines in the order they were set. Every
	// attempt gets the same timeout, so the deadlines are already sorted and a
	// FIFO replaces thousands of heap entries that mostly expire unused.
	timeouts deadlines

	// channels[b*len(Regions)+region] holds backend b's stats messages on
	// their way to a region, in arrival order (the latency of a pair is
	// fixed): one array for the fleet (chanOf).
	channels []channel
	// inbound[region] holds the arrivals of the messages in the channels to
	// the region that syncRegion has not yet passed (dueScratch: its
	// scratch list of backends).
	inbound    []inbox
	dueScratch []int32
	// prefetched sums what prefetch read; nothing reads it.
	prefetched uint64
	// freeMsgs are stats messages no region reads any more, for reuse.
	freeMsgs []*message
	// droppedAttempts were dropped during the event in hand; freeAttempts,
	// dropped before it, are memory for new attempts (dropAttempt).
	droppedAttempts, freeAttempts []*attempt
	// armed[region]: some router of the region has requests waiting, so each
	// stats arrival there is an event (it may release them). Otherwise the
	// region's routers read what has arrived when they next place a request:
	// a message only overwrites the one before it, so reading the latest
	// arrived message then is the same as having applied each on time.
	armed []bool

	// members[p] lists pool p's backends (every backend without pools);
	// local[b] is backend b's index in its pool.
	members [][]int
	local   []int
	// poolLoads holds each pool's load for the pool router, refilled per
	// request; nil when the router never reads loads (PoolLoadReader).
	poolLoads []PoolLoad
	// models are the models any backend names, sorted (none: sessions name
	// no model).
	models []string

	// src is where turns come from; observer, if set, hears of admissions
	// and completions (a closed loop).
	src      source
	observer turnObserver
	// stoppedAt is when the run stopped (a trace drains early); warm holds
	// the workers' totals at the end of the warm-up, for figures over the
	// measured part only.
	stoppedAt time.Duration
	warm      [][]engine.Totals

	// err is the first internal inconsistency found where no error can be
	// returned; the loop stops on it.
	err        error
	track      bool // telemetry on: reports, probes, results to routers
	faultRng   *rand.Rand
	dispatches []Dispatch
	marks      []Mark
	samples    []SignalSample

	ask       engine.Request // place's request while the picker reads it
	engineOut []engine.Event
	admitted  []gateway.Request
	batch     []gateway.Request
	outcomes  []router.Outcome
}

// Run simulates cfg with policies from reg and returns what it measured. It is
// deterministic: the same configuration and seed give the same result.
func Run(ctx context.Context, cfg Config, reg *policy.Registry) (*Result, error) {
	s, err := start(cfg, reg)
	if err != nil {
		return nil, err
	}
	if err := s.loop(ctx); err != nil {
		return nil, err
	}
	return s.result(), nil
}

// start validates cfg and builds its simulation, which keeps its own copy.
func start(cfg Config, reg *policy.Registry) (*simulation, error) {
	if err := cfg.Validate(reg); err != nil {
		return nil, err
	}
	return build(&cfg, reg)
}

func build(cfg *Config, reg *policy.Registry) (*simulation, error) {
	// A class's lead runs before the warm-up: the simulated clock starts
	// there, so that the class's time zero is at lead.
	var lead time.Duration
	if cfg.Class != nil {
		lead = cfg.Class.Lead
	}
	s := &simulation{cfg: cfg, end: lead + cfg.Warmup + cfg.Measure + cfg.Cooldown,
		rng:         rand.New(rand.NewPCG(subSeed(cfg.Seed, streamArrivals), 0)),
		sessionSeed: subSeed(cfg.Seed, streamSessions),
		// A hint only: capped so that a long window does not allocate up front.
		coll: metrics.NewCollector(lead+cfg.Warmup, lead+cfg.Warmup+cfg.Measure, cfg.Client.TTFTSLO,
			int(min(1.05*cfg.RPS*cfg.Measure.Seconds(), 1<<18)))}
	s.timers = timerSet{q: &s.q}
	if cfg.Cooldown > 0 {
		s.coll.SampleStarts()
	}
	if !cfg.KeepRecords {
		s.coll.DropRecords() // 12 bytes a measured turn, not 136 and more
	}
	src, err := newSource(s)
	if err != nil {
		return nil, err
	}
	s.src = src
	s.observer, _ = src.(turnObserver)
	if cfg.RouterAttempts == 0 {
		cfg.RouterAttempts = router.DefaultMaxAttempts
	}
	pools := max(len(cfg.Pools), 1)
	s.members = make([][]int, pools)
	s.local = make([]int, len(cfg.Backends))
	for i, spec := range cfg.Backends {
		s.local[i] = len(s.members[spec.Pool])
		s.members[spec.Pool] = append(s.members[spec.Pool], i)
	}
	if lr, ok := cfg.PoolRouter.(PoolLoadReader); cfg.PoolRouter != nil && (!ok || lr.ReadsLoads()) {
		s.poolLoads = make([]PoolLoad, len(cfg.Pools))
	}
	pbs := make([][]policy.Backend, pools)
	rbs := make([][]router.Backend, pools)
	for i, spec := range cfg.Backends {
		gw, err := gateway.New(i, spec.Workers, cfg.Gateway)
		if err != nil {
			return nil, fmt.Errorf("sim: backend %q: %w", spec.Name, err)
		}
		cl, err := cluster.New(spec.Workers, spec.Profile, cfg.Engine)
		if err != nil {
			return nil, fmt.Errorf("sim: backend %q: %w", spec.Name, err)
		}
		bs := &backendState{spec: spec, gw: gw, cl: cl,
			workerTimer: s.timers.grow(spec.Workers), statsTimer: s.timers.grow(1)}
		if bs.slots, bs.views, err = newSlots(cfg.Gateway, spec, cl); err != nil {
			return nil, fmt.Errorf("sim: backend %q: %w", spec.Name, err)
		}
		s.backends = append(s.backends, bs)
		pbs[spec.Pool] = append(pbs[spec.Pool], policy.Backend{Name: spec.Name, Key: policy.KeyOf(spec.Name)})
		rbs[spec.Pool] = append(rbs[spec.Pool], router.Backend{Name: spec.Name, Capacity: gw.Capacity(), CacheTokens: cacheTokens(spec), MaxModelLen: spec.MaxModelLen, Models: spec.Models})
		s.models = append(s.models, spec.Models...)
	}
	slices.Sort(s.models)
	s.models = slices.Compact(s.models)
	s.byRegion = make([][]int, len(cfg.Regions))
	for ri, region := range cfg.Regions {
		for range region.Routers {
			idx := len(s.routers)
			rs := &routerState{region: ri, timer: s.timers.grow(1)}
			for p := range pools {
				pol, err := reg.New(cfg.Policy, cfg.Params, pbs[p], rand.New(rand.NewPCG(subSeed(cfg.Seed, streamPolicies), uint64(idx)|uint64(p)<<32)))
				if err != nil {
					return nil, fmt.Errorf("sim: %w", err)
				}
				r, err := router.NewWith(idx, pol, rbs[p], cfg.Router)
				if err != nil {
					return nil, fmt.Errorf("sim: %w", err)
				}
				rs.subs = append(rs.subs, r)
			}
			rs.r = rs.subs[0]
			s.routers = append(s.routers, rs)
			s.byRegion[ri] = append(s.byRegion[ri], idx)
		}
		if region.Routers > 0 {
			s.regions = append(s.regions, ri)
		}
	}
	s.armed = make([]bool, len(cfg.Regions))
	s.inbound = make([]inbox, len(cfg.Regions))
	s.channels = make([]channel, len(s.backends)*len(cfg.Regions))
	for b := range s.backends {
		s.markStats(b)
	}
	s.src.start(s)
	s.setupFaults()
	return s, nil
}

func (s *simulation) loop(ctx context.Context) error {
	for {
		if done, err := s.step(ctx); done || err != nil {
			return err
		}
	}
}

// step handles the next event. It reports done when the run has ended:
// the queue is empty, the next event is past the end, or every measured
// turn has ended.
func (s *simulation) step(ctx context.Context) (done bool, err error) {
	if s.q.len() == 0 && s.timeouts.len() == 0 {
		s.stoppedAt = s.end
		return true, nil
	}
	e := s.next()
	if e.at >= s.end {
		s.stoppedAt = s.end
		return true, nil
	}
	s.now = e.at
	s.events++
	if s.events&0xffff == 0 {
		if err := ctx.Err(); err != nil {
			return true, fmt.Errorf("sim: stopped at %v of %v: %w", s.now, s.end, err)
		}
	}
	if err := s.handle(&e); err != nil {
		return true, err
	}
	if len(s.droppedAttempts) > 0 {
		s.recycleAttempts()
	}
	if s.err != nil {
		return true, s.err
	}
	if s.src.drained() {
		s.stoppedAt = s.now // drained: every measured turn has ended
		return true, nil
	}
	return false, nil
}

// next pops the earliest event of the queue (timers included) and the
// timeout FIFO.
func (s *simulation) next() event {
	if s.timeouts.len() > 0 && (s.q.len() == 0 || s.timeouts.front().before(s.q.head())) {
		return s.timeouts.pop()
	}
	return s.q.pop()
}

func (s *simulation) handle(e *event) error {
	switch e.kind {
	case evSessionArrive:
		s.src.arrive(s, *e)
	case evWarmupEnd:
		s.snapshotWarm()
	case evTurnStart:
		if ss := s.sessions.get(e.id); ss != nil {
			s.nextTurn(ss)
		}
	case evAttemptStart:
		if ss := s.sessions.get(e.id); ss != nil {
			s.sendAttempt(ss)
		}
	case evRouterArrive:
		if a := s.attempts.get(e.id); a != nil && a.done {
			s.dropAttempt(a.id) // timed out on the way
		} else if a != nil {
			rs := s.routers[a.router]
			s.syncRegion(rs.region)
			if a.pool = s.poolFor(a.sess); a.pool < 0 {
				a.place = responding
				s.q.push(clientError(s.now+s.cfg.ClientLatency, a.id, client.TooLong))
				break
			}
			d := rs.subs[a.pool].Route(s.now, a.id, router.Ask{Session: a.sess.key, Tokens: a.tokens(), Model: s.modelOf(a.sess), Blocks: traceBlocks(a.sess.req), BlockTokens: s.cfg.BlockSize})
			s.apply(a, s.global(a.pool, d))
			s.scheduleRouterTimer(a.router)
			s.markWeights(a.router)
		}
	case evRouterTimer:
		rs := s.routers[e.router]
		s.syncRegion(rs.region)
		for p, r := range rs.subs {
			s.outcomes = r.OnTimer(s.now, s.outcomes[:0])
			s.applyOutcomes(p)
		}
		s.scheduleRouterTimer(int(e.router))
		s.markWeights(int(e.router))
	case evGatewayArrive:
		s.gatewayArrive(e.id)
	case evWorker:
		return s.workerStep(int(e.backend), int(e.worker))
	case evStatsEmit:
		s.statsEmit(int(e.backend))
	case evStatsDeliver:
		s.deliver(int(e.backend), int(e.region))
	case evClientFirstToken:
		if a := s.attempts.get(e.id); a != nil && !a.done {
			a.sess.turn.FirstToken(s.now)
			s.tellRouter(a, router.Result{Kind: router.Succeeded})
		}
	case evClientDone:
		if a := s.attempts.get(e.id); a != nil && !a.done {
			a.done = true
			a.sess.turn.Complete(s.now, a.backend, a.cached, a.output)
			a.sess.turn.Record.HostTokens = a.host
			if s.observer != nil {
				s.observer.completed(s, a)
			}
			s.endAttempt(a)
			s.endTurn(a.sess)
		}
	case evRouterRefused:
		if a := s.attempts.get(e.id); a != nil {
			s.routerRefused(a, e.failure, e.neverSent)
		}
	case evClientError:
		if a := s.attempts.get(e.id); a != nil && !a.done {
			switch f := e.failure; {
			case a.told: // a refusal its router already heard of
			case f == client.Errored:
				s.tellRouter(a, router.Result{Kind: router.Errored})
			case f == client.Invalid:
				s.tellRouter(a, router.Result{Kind: router.TooLong, Tokens: a.tokens(), Limit: a.limit})
			}
			s.failAttempt(a, e.failure)
		}
	case evAttemptTimeout:
		if a := s.attempts.get(e.id); a != nil && !a.done {
			if a.place == toGateway || a.place == atGateway || a.place == lost {
				s.tellRouter(a, router.Result{Kind: router.Errored})
			}
			s.cancelAttempt(a)
			s.failAttempt(a, client.TimedOut)
		}
	case evFault:
		s.applyFault(int(e.fault), e.ending)
	case evTelemetry:
		s.telemetryTick(int(e.backend))
	case evProbe:
		s.probe(int(e.router))
	case evBurst:
		s.burst(int(e.fault))
	default:
		return fmt.Errorf("sim: unknown event kind %d", e.kind)
	}
	return nil
}

// modelOf is the model session ss asks for: one of the models the fleet's
// backends name, by its key (no draw from the run's random streams, so a
// fleet that names none runs as before), or none.
func (s *simulation) modelOf(ss *session) string {
	if len(s.models) == 0 {
		return ""
	}
	return s.models[ss.key%uint64(len(s.models))]
}
