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
	"github.com/stargate-llm/stargate/telemetry"
	"github.com/stargate-llm/stargate/workload"
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

// Result is what one run measured.
type Result struct {
	Summary  metrics.Summary
	Backends []BackendResult
	// Events is the number of events the run processed.
	Events uint64
	// Records holds the measured turns when Config.KeepRecords is set.
	Records []metrics.TurnRecord
	// Open is set for an open-loop run (Config.Requests).
	Open *OpenResult
	// Dispatches holds every dispatch when Config.RecordDispatches is set.
	Dispatches []Dispatch `json:",omitempty"`
	// Marks are notable instants of a run with telemetry or faults.
	Marks []Mark `json:",omitempty"`
	// Routers is each router's view of the backends at the end of a run
	// with telemetry.
	Routers []RouterEnd `json:",omitempty"`
	// Unfinished holds the measured turns still running at the end, when
	// Config.KeepRecords and Config.Cooldown are set.
	Unfinished []metrics.TurnRecord
	// Closed is set for a closed-loop run (Config.Clients).
	Closed *ClosedResult `json:",omitempty"`
}

// ClosedResult is what a closed-loop run adds, over its measured window.
type ClosedResult struct {
	Clients int `json:"clients"`
	// Admitted counts the attempts a gateway handed to its engine in the
	// window; GatewayQueue* is their time from arrival at the gateway to
	// that admission (zero for those admitted at once).
	Admitted          int     `json:"admitted"`
	GatewayQueueMeanS float64 `json:"gateway_queue_mean_s"`
	GatewayQueueP95S  float64 `json:"gateway_queue_p95_s"`
	// Steps and MeanStepS are the engine steps the fleet's workers took in
	// the window and their mean duration.
	Steps     int64   `json:"steps"`
	MeanStepS float64 `json:"mean_step_s"`
	// Of the turns that completed in the window: Late missed the TTFT SLO,
	// Preempted were preempted and recomputed in the engine at least once
	// on their successful attempt, and Degraded did either (or both).
	Late      int `json:"late"`
	Preempted int `json:"preempted"`
	Degraded  int `json:"degraded"`
}

// Dispatch is one attempt a router sent to a backend.
type Dispatch struct {
	At time.Duration `json:"at"`
	// Session is the session of the turn it belongs to, as its record
	// names it (metrics.TurnRecord.Session).
	Session uint64 `json:"session"`
	Router  int    `json:"router"`
	Backend int    `json:"backend"`
	Tokens  int    `json:"tokens"`
	// Model is the model its session asks for (none when no backend names
	// models).
	Model string `json:"model,omitempty"`
	// Misroute: the backend could not serve it when it was sent (killed,
	// hung, or the request exceeded its context limit).
	Misroute bool `json:"misroute"`
}

// Mark is a notable instant: a fault starting or ending ("fault:kill",
// "end:kill") or a backend's first report without hardware signals after
// its exporter died ("fallback").
type Mark struct {
	At      time.Duration `json:"at"`
	Backend int           `json:"backend"`
	What    string        `json:"what"`
}

// RouterEnd is one router's view at the end of a run.
type RouterEnd struct {
	Backends []router.BackendStatus `json:"backends"`
	// Weights are the policy's weights, if it keeps any.
	Weights []policy.BackendWeight `json:"weights,omitempty"`
}

// OpenResult is what an open-loop run adds.
type OpenResult struct {
	// Sent is how many requests arrived (warm-up included).
	Sent int `json:"sent"`
	// EndS is when the run stopped: every measured turn had ended.
	EndS float64 `json:"end_s"`
}

// nextSent is the number of open-loop requests that arrived.
func (s *simulation) nextSent() int { return int(s.nextSess) }

// BackendResult is one backend's share of a run.
type BackendResult struct {
	Name    string `json:"name"`
	Region  string `json:"region"`
	Workers int    `json:"workers"`
	metrics.BackendSummary
	// BusyPct is the share of the run's worker time spent in steps.
	BusyPct float64 `json:"busy_pct"`
	// MeanBatch and MeanKVFillPct are time-weighted over busy time.
	MeanBatch     float64 `json:"mean_batch"`
	MeanKVFillPct float64 `json:"mean_kv_fill_pct"`
	Preemptions   int64   `json:"preemptions"`
	// Gateway counts over the whole run (warm-up included). Every request a
	// gateway received is completed, cancelled, rejected, or still active or
	// waiting at the end.
	GatewayReceived  uint64 `json:"gateway_received"`
	GatewayCompleted uint64 `json:"gateway_completed"`
	GatewayCancelled uint64 `json:"gateway_cancelled"`
	GatewayRejected  uint64 `json:"gateway_rejected"`
	GatewayActive    int    `json:"gateway_active"`
	GatewayWaiting   int    `json:"gateway_waiting"`
	// MaxInputTPS is the gateway's maximum input tokens/s at the end of the
	// run (the weight pulsar-waw-tps places by); PeakInputTPS the highest
	// input tokens/s it served.
	MaxInputTPS  float64 `json:"max_input_tps"`
	PeakInputTPS float64 `json:"peak_input_tps"`
}

// SetEngine fills the engine figures from the backend's workers' counters
// summed over span seconds, for KV budgets of kvTokens per worker.
func (r *BackendResult) SetEngine(t engine.Totals, span float64, kvTokens int) {
	r.BusyPct = pct(t.BusyTime.Seconds(), span*float64(r.Workers))
	r.Preemptions = t.Preemptions
	if busy := t.BusyTime.Seconds(); busy > 0 {
		r.MeanBatch = t.BatchSeconds / busy
		r.MeanKVFillPct = 100 * t.KVTokenSeconds / busy / float64(kvTokens)
	}
}

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
	output  int
	gwAt    time.Duration // arrival at the gateway
	preempt int           // times the engine preempted it
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

// session is a conversation of the session model, or one request of a
// class's open loop (ws is nil).
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
	ws       *workload.Session
	client   uint64 // closed loop: its client (1-based); 0 for none
	region   int
	router   int
	turn     client.Turn
	prompt   workload.Turn
}

type backendState struct {
	spec BackendSpec
	gw   *gateway.Gateway
	cl   *cluster.Backend
	// capped are the workers as the picker sees them when the gateway's
	// slots per worker are fewer than the engine's sequences (nil otherwise).
	capped      []cappedWorker
	workerTimer int // timer id of worker 0; worker w is workerTimer+w
	statsTimer  int

	fault    faultState
	ttft     telemetry.Window
	errs     telemetry.ErrorRate
	lastBusy []time.Duration
	fellBack bool
	gpus     []telemetry.GPUValues // scratch
}

type inFlight struct {
	at time.Duration
	st *gateway.Stats
}

type channel struct {
	q    []inFlight
	head int
}

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
	// refused[b]: a connection to backend b was refused; it takes nothing
	// from this router until its next stats arrive (nil until one is).
	refused []bool
}

func (rs *routerState) waiting() int {
	n := 0
	for _, r := range rs.subs {
		n += r.Waiting()
	}
	return n
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
	arrivals *workload.Arrivals
	// stream and pending: a class's open loop and its next request.
	stream     *workload.Stream
	pending    workload.Request
	clientSeed uint64
	lead       time.Duration // the class's Lead: its time zero on our clock
	// busy counts the turns in flight per conversation of a class whose
	// turns follow each other, and held keeps the turns that wait for them.
	busy     map[uint64]int
	held     map[uint64][]workload.Request
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
	timeouts  []event
	timeoutAt int

	// channels[b][region] holds backend b's stats messages on their way to a
	// region, in arrival order (the latency of a pair is fixed).
	channels [][]channel
	// due[region] is at most the earliest arrival time of a message still
	// in a channel to the region (a lower bound: delivering by event does
	// not raise it): syncRegion skips its scan over every backend before then.
	due []time.Duration
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
	// models are the models any backend names, sorted (none: sessions name
	// no model).
	models []string

	// Open loop (Config.Requests): the next request to arrive, the measured
	// turns not yet ended, when arrivals stop, and the workers' totals at the end
	// of the warm-up (for figures over the measured part only).
	open        bool
	nextReq     int
	live        int
	arrivalsEnd time.Duration
	stoppedAt   time.Duration
	warm        [][]engine.Totals

	// Closed loop (Config.Clients): what the run adds to its result, and the
	// gateway queue times of the window's admissions.
	closed     *ClosedResult
	queueS     []float64
	queueSum   float64
	track      bool // telemetry on: reports, probes, results to routers
	faultRng   *rand.Rand
	dispatches []Dispatch
	marks      []Mark

	engineOut []engine.Event
	admitted  []gateway.Request
	batch     []gateway.Request
	outcomes  []router.Outcome
}

// Run simulates cfg with policies from reg and returns what it measured. It is
// deterministic: the same configuration and seed give the same result.
func Run(ctx context.Context, cfg Config, reg *policy.Registry) (*Result, error) {
	if err := cfg.Validate(reg); err != nil {
		return nil, err
	}
	s, err := build(&cfg, reg)
	if err != nil {
		return nil, err
	}
	if err := s.loop(ctx); err != nil {
		return nil, err
	}
	return s.result(), nil
}

func build(cfg *Config, reg *policy.Registry) (*simulation, error) {
	// A class's lead runs before the warm-up: the simulated clock starts
	// there, so that the class's time zero is at lead.
	var lead time.Duration
	if cfg.Class != nil {
		lead = cfg.Class.Lead
	}
	s := &simulation{cfg: cfg, end: lead + cfg.Warmup + cfg.Measure + cfg.Cooldown, lead: lead,
		rng:         rand.New(rand.NewPCG(subSeed(cfg.Seed, streamArrivals), 0)),
		sessionSeed: subSeed(cfg.Seed, streamSessions),
		// A hint only: capped so that a long window does not allocate up front.
		coll: metrics.NewCollector(lead+cfg.Warmup, lead+cfg.Warmup+cfg.Measure, cfg.Client.TTFTSLO,
			int(min(1.05*cfg.RPS*cfg.Measure.Seconds(), 1<<18)))}
	if cfg.Cooldown > 0 {
		s.coll.SampleStarts()
	}
	if cfg.Requests != nil {
		s.open, s.arrivalsEnd = true, s.end
		s.coll.SampleStarts()
		// Every measured turn ends within its attempts' timeouts and backoffs.
		c := cfg.Client
		s.end += time.Duration(c.MaxAttempts)*(c.AttemptTimeout+time.Duration(c.MaxAttempts)*c.RetryBackoff) + time.Second
	} else if cfg.Class != nil {
		st, err := cfg.Class.Stream(cfg.RPS, subSeed(cfg.Seed, streamClass))
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		s.stream, s.pending, s.clientSeed = st, st.Next(), subSeed(cfg.Seed, streamClients)
		s.busy, s.held = map[uint64]int{}, map[uint64][]workload.Request{}
	} else if cfg.Clients > 0 {
		s.closed = &ClosedResult{Clients: cfg.Clients}
	} else {
		arr, err := workload.NewArrivals(cfg.Workload.SessionRate(cfg.RPS), s.rng)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		s.arrivals = arr
	}
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
		if limit := cfg.Gateway.SlotsPerWorker; cfg.Gateway.MaxConcurrency == 0 && limit < spec.Profile.MaxSeqs {
			for w := range spec.Workers {
				bs.capped = append(bs.capped, cappedWorker{cl.Worker(w), limit})
			}
		}
		s.backends = append(s.backends, bs)
		pbs[spec.Pool] = append(pbs[spec.Pool], policy.Backend{Name: spec.Name, Key: policy.KeyOf(spec.Name)})
		rbs[spec.Pool] = append(rbs[spec.Pool], router.Backend{Name: spec.Name, Capacity: gw.Capacity(), MaxModelLen: spec.MaxModelLen, Models: spec.Models})
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
	s.due = make([]time.Duration, len(cfg.Regions))
	for r := range s.due {
		s.due[r] = noMessage
	}
	s.channels = make([][]channel, len(s.backends))
	for b := range s.backends {
		s.channels[b] = make([]channel, len(cfg.Regions))
		s.markStats(b)
	}
	switch {
	case s.open:
		s.pushRequest()
		if cfg.Warmup > 0 {
			s.q.push(event{at: cfg.Warmup, kind: evWarmupEnd})
		}
	case s.stream != nil:
		s.q.push(event{at: s.lead + s.pending.At, kind: evSessionArrive})
	case s.closed != nil:
		for c := range cfg.Clients {
			s.q.push(event{at: time.Duration(s.rng.Int64N(int64(time.Second))), kind: evSessionArrive, id: uint64(c) + 1})
		}
		if cfg.Warmup > 0 {
			s.q.push(event{at: cfg.Warmup, kind: evWarmupEnd})
		}
	default:
		s.q.push(event{at: s.arrivals.Next(0), kind: evSessionArrive})
	}
	s.setupFaults()
	return s, nil
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

func (s *simulation) loop(ctx context.Context) error {
	for s.q.len() > 0 || s.timers.len() > 0 || s.timeoutAt < len(s.timeouts) {
		e := s.next()
		if e.at >= s.end {
			break
		}
		s.now = e.at
		s.events++
		if s.events&0xffff == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("sim: stopped at %v of %v: %w", s.now, s.end, err)
			}
		}
		if err := s.handle(&e); err != nil {
			return err
		}
		if s.open && s.live == 0 && s.nextReq >= len(s.cfg.Requests) {
			s.stoppedAt = s.now // drained: every measured turn has ended
			return nil
		}
	}
	s.stoppedAt = s.end
	return nil
}

// next pops the earliest event of the queue, the timers and the timeout FIFO.
func (s *simulation) next() event {
	if s.timers.len() > 0 && (s.q.len() == 0 || s.timers.top().less(&s.q.items[0])) &&
		(s.timeoutAt >= len(s.timeouts) || s.timers.top().less(&s.timeouts[s.timeoutAt])) {
		return s.timers.pop()
	}
	if s.timeoutAt < len(s.timeouts) && (s.q.len() == 0 || s.timeouts[s.timeoutAt].less(&s.q.items[0])) {
		e := s.timeouts[s.timeoutAt]
		s.timeoutAt++
		if s.timeoutAt > 4096 && s.timeoutAt*2 > len(s.timeouts) {
			s.timeouts = s.timeouts[:copy(s.timeouts, s.timeouts[s.timeoutAt:])]
			s.timeoutAt = 0
		}
		return e
	}
	return s.q.pop()
}

func (s *simulation) handle(e *event) error {
	switch e.kind {
	case evSessionArrive:
		switch {
		case s.open:
			s.traceArrive()
		case s.stream != nil:
			s.requestArrive()
		case s.closed != nil:
			s.clientArrive(e.id)
		default:
			s.sessionArrive()
		}
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
			s.attempts.del(a.id) // timed out on the way
		} else if a != nil {
			rs := s.routers[a.router]
			s.syncRegion(rs.region)
			if a.pool = s.poolFor(a.sess); a.pool < 0 {
				a.place = responding
				s.q.push(event{at: s.now + s.cfg.ClientLatency, kind: evClientError, id: a.id, b: int32(client.TooLong)})
				break
			}
			d := rs.subs[a.pool].Route(s.now, a.id, router.Ask{Session: a.sess.key, Tokens: a.tokens(), Model: s.modelOf(a.sess), Blocks: traceBlocks(a.sess.req), BlockTokens: s.cfg.BlockSize})
			s.apply(a, s.global(a.pool, d))
			s.scheduleRouterTimer(a.router)
			s.markWeights(a.router)
		}
	case evRouterTimer:
		rs := s.routers[e.a]
		s.syncRegion(rs.region)
		for p, r := range rs.subs {
			s.outcomes = r.OnTimer(s.now, s.outcomes[:0])
			s.applyOutcomes(p)
		}
		s.scheduleRouterTimer(int(e.a))
		s.markWeights(int(e.a))
	case evGatewayArrive:
		s.gatewayArrive(e.id)
	case evWorker:
		return s.workerStep(int(e.a), int(e.b))
	case evStatsEmit:
		s.statsEmit(int(e.a))
	case evStatsDeliver:
		s.deliver(int(e.b), int(e.a))
	case evClientFirstToken:
		if a := s.attempts.get(e.id); a != nil && !a.done {
			a.sess.turn.FirstToken(s.now)
			s.tellRouter(a, router.Result{Kind: router.Succeeded})
		}
	case evClientDone:
		if a := s.attempts.get(e.id); a != nil && !a.done {
			a.done = true
			a.sess.turn.Complete(s.now, a.backend, a.cached, a.output)
			if s.closed != nil && s.now >= s.cfg.Warmup {
				s.countCompletion(a)
			}
			s.endAttempt(a)
			s.endTurn(a.sess)
		}
	case evRouterRefused:
		if a := s.attempts.get(e.id); a != nil {
			s.routerRefused(a, client.Failure(e.b), e.a == 1)
		}
	case evClientError:
		if a := s.attempts.get(e.id); a != nil && !a.done {
			switch f := client.Failure(e.b); {
			case a.told: // a refusal its router already heard of
			case f == client.Errored:
				s.tellRouter(a, router.Result{Kind: router.Errored})
			case f == client.Invalid:
				s.tellRouter(a, router.Result{Kind: router.TooLong, Tokens: a.tokens(), Limit: a.limit})
			}
			s.failAttempt(a, client.Failure(e.b))
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
		s.applyFault(int(e.a), e.b == 1)
	case evTelemetry:
		s.telemetryTick(int(e.a))
	case evProbe:
		s.probe(int(e.a))
	case evBurst:
		s.burst(int(e.a))
	default:
		return fmt.Errorf("sim: unknown event kind %d", e.kind)
	}
	return nil
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

func (s *simulation) sessionArrive() {
	ss := s.newSession(s.rng)
	s.q.push(event{at: s.arrivals.Next(s.now), kind: evSessionArrive})
	s.nextTurn(ss)
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

// poolFor is the pool of the session's current turn (see PoolFor).
func (s *simulation) poolFor(ss *session) int {
	if len(s.cfg.Pools) == 0 {
		return 0
	}
	if s.cfg.PoolRouter != nil && ss.req != nil {
		loads := make([]PoolLoad, len(s.cfg.Pools))
		for p, members := range s.members {
			for _, b := range members {
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

// endSession removes a session; an open-loop one is a turn that ended. A
// closed-loop client starts its next session after a think time.
func (s *simulation) endSession(ss *session) {
	s.sessions.del(ss.id)
	if ss.measured {
		s.live--
	}
	if ss.client > 0 {
		s.q.push(event{at: s.now + ss.ws.ThinkTime(), kind: evSessionArrive, id: ss.client})
	}
}

// newSession creates a session in a region and router drawn from rng.
func (s *simulation) newSession(rng *rand.Rand) *session {
	s.nextSess++
	region := s.regions[rng.IntN(len(s.regions))]
	rs := s.byRegion[region]
	ss := &session{id: s.nextSess, key: s.nextSess, ws: s.cfg.Workload.NewSession(s.sessionSeed, s.nextSess), region: region,
		router: rs[rng.IntN(len(rs))]}
	s.sessions.put(ss.id, ss)
	return ss
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
	if ss.req != nil {
		session = ss.id // a trace request's key is shared by the requests of one prefix
	}
	ss.turn = s.cfg.Client.NewTurn(s.now, metrics.TurnRecord{Session: session, Turn: t.Index, Region: ss.region,
		Router: ss.router, PromptTokens: t.PromptTokens})
	s.coll.TurnStarted(s.now)
	s.sendAttempt(ss)
}

func (s *simulation) sendAttempt(ss *session) {
	s.nextID++
	a := &attempt{id: s.nextID, sess: ss, router: ss.router, backend: -1, retry: router.NewRetry(s.cfg.RouterAttempts, nil)}
	s.attempts.put(a.id, a)
	deadline := ss.turn.Attempt(s.now)
	s.q.push(event{at: s.now + s.cfg.ClientLatency, kind: evRouterArrive, id: a.id})
	timeout := event{at: deadline, kind: evAttemptTimeout, id: a.id}
	s.q.stamp(&timeout)
	s.timeouts = append(s.timeouts, timeout)
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
		s.q.push(event{at: s.now + s.cfg.ClientLatency, kind: evClientError, id: a.id, b: int32(client.Rejected)})
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

// back is the latency of a response from backend b to the client of attempt a.
func (s *simulation) back(a *attempt, b int) time.Duration {
	return s.toRouter(a, b) + s.cfg.ClientLatency
}

// toRouter is the latency of a message from backend b to the router of
// attempt a.
func (s *simulation) toRouter(a *attempt, b int) time.Duration {
	return s.cfg.Latency[s.backends[b].spec.Region][s.routers[a.router].region] + s.pathDelay(b)
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
		s.attempts.del(id)
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
	e := event{at: s.now + s.toRouter(a, b), kind: evRouterRefused, id: a.id, b: int32(f)}
	if neverSent {
		e.a = 1
	}
	s.q.push(e)
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
		if rs.refused == nil {
			rs.refused = make([]bool, len(s.backends))
		}
		if !rs.refused[b] {
			rs.refused[b] = true
			sub.SetEligible(id, false)
		}
	}
	if a.done {
		s.attempts.del(a.id)
		return
	}
	a.told, a.refusal = true, f
	if step.Again {
		if d := sub.Route(s.now, a.id, router.Ask{Session: a.sess.key, Tokens: a.tokens(), Exclude: a.retry.Exclude(), Model: s.modelOf(a.sess), Blocks: traceBlocks(a.sess.req), BlockTokens: s.cfg.BlockSize}); d.Kind != policy.Reject {
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
	s.q.push(event{at: s.now + s.cfg.ClientLatency, kind: evClientError, id: a.id, b: int32(a.refusal)})
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
	if s.closed != nil && s.now >= s.cfg.Warmup {
		q := (s.now - a.gwAt).Seconds()
		s.queueS = append(s.queueS, q)
		s.queueSum += q
	}
	w, err := s.place(bs, r)
	if err != nil {
		// The engine can never hold it: fail the attempt at the gateway. Its
		// slot may admit a queued request, which the caller's submitAll takes.
		_, s.admitted = bs.gw.Cancel(s.now, a.id, s.admitted)
		a.place = responding
		s.q.push(event{at: s.now + s.back(a, b), kind: evClientError, id: a.id, b: int32(client.Errored)})
		return
	}
	s.scheduleWorker(b, w)
}

// cappedWorker is an engine worker as the picker sees it behind a gateway
// that lets each worker hold at most limit requests, as the live gateway's
// per-worker slots (gateway.Slots, MaxInflightPerWorker) do.
type cappedWorker struct {
	*engine.Worker
	limit int
}

func (w cappedWorker) SeqLimit() int { return w.limit }

// place picks a worker of bs for r and submits it there. Behind per-worker
// slots the picker keeps each worker within its slots: the gateway admits at
// most slots x workers requests, so a worker with a free slot exists (but for
// the end of the step in which a cancelled request leaves its engine).
func (s *simulation) place(bs *backendState, r engine.Request) (int, error) {
	if bs.capped == nil {
		return bs.cl.Submit(s.now, r)
	}
	w := cluster.Pick(s.now, &r, bs.capped)
	if err := bs.cl.Worker(w).Submit(s.now, r); err != nil {
		return -1, err
	}
	return w, nil
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
	e := event{at: at, kind: evWorker, a: int32(b), b: int32(w)}
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
			for w := range bs.cl.Len() {
				if bs.cl.Worker(w).Cancel(s.now, a.id) {
					s.scheduleWorker(a.backend, w)
					break
				}
			}
		}
		s.submitAll(a.backend)
		s.markStats(a.backend)
	}
	// toRouter and toGateway: the arrival handlers see a.done and let it go.
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
	s.requestEnded(ss)
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

func (s *simulation) endAttempt(a *attempt) {
	if a.place == toRouter || a.place == toGateway {
		return // still referenced by an arrival in flight, which removes nothing
	}
	s.attempts.del(a.id)
}

func (s *simulation) endTurn(ss *session) {
	s.coll.Add(ss.turn.Record)
	if ss.ws == nil { // one request of a trace or a class's open loop
		s.endSession(ss)
		s.requestEnded(ss)
		return
	}
	s.q.push(event{at: s.now + ss.ws.ThinkTime(), kind: evTurnStart, id: ss.id})
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
	e := event{at: at, kind: evStatsEmit, a: int32(b)}
	s.q.stamp(&e)
	s.timers.set(bs.statsTimer, e)
}

func (s *simulation) statsEmit(b int) {
	bs := s.backends[b]
	st := bs.gw.TakeStats(s.now)
	for _, region := range s.regions {
		at := s.now + s.cfg.Latency[bs.spec.Region][region] + s.pathDelay(b)
		ch := &s.channels[b][region]
		if n := len(ch.q); n > ch.head && ch.q[n-1].at > at {
			at = ch.q[n-1].at // one stream: messages arrive in order
		}
		ch.q = append(ch.q, inFlight{at: at, st: st})
		s.due[region] = min(s.due[region], at)
		if s.armed[region] {
			s.q.push(event{at: at, kind: evStatsDeliver, a: int32(region), b: int32(b)})
		}
	}
	s.markStats(b)
}

// deliver hands the routers of a region the latest stats of backend b that
// have arrived by now, if they have not seen it.
func (s *simulation) deliver(b, region int) {
	ch := &s.channels[b][region]
	var latest *gateway.Stats
	for ch.head < len(ch.q) && ch.q[ch.head].at <= s.now {
		latest = ch.q[ch.head].st
		ch.q[ch.head] = inFlight{}
		ch.head++
	}
	if ch.head > 64 && 2*ch.head > len(ch.q) {
		ch.q = ch.q[:copy(ch.q, ch.q[ch.head:])]
		ch.head = 0
	}
	if latest == nil {
		return
	}
	p := s.cfg.Backends[b].Pool
	if len(s.cfg.Pools) > 0 { // the pool's router knows the backend by its index in the pool
		local := *latest
		local.Backend = s.local[b]
		latest = &local
	}
	for _, ri := range s.byRegion[region] {
		if rs := s.routers[ri]; rs.refused != nil && rs.refused[b] {
			rs.refused[b] = false // it answers again
			rs.subs[p].SetEligible(router.BackendID(s.local[b]), true)
		}
		s.outcomes = s.routers[ri].subs[p].OnStats(s.now, latest, s.outcomes[:0])
		s.applyOutcomes(p)
		s.scheduleRouterTimer(ri)
		s.markWeights(ri)
	}
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

// syncRegion brings a region's routers up to date before one of them reads
// its views.
func (s *simulation) syncRegion(region int) {
	if s.due[region] > s.now {
		return // nothing has arrived: the scan below would deliver nothing
	}
	next := noMessage
	s.due[region] = next // a message sent while delivering lowers it again
	for b := range s.backends {
		ch := &s.channels[b][region]
		if ch.head < len(ch.q) && ch.q[ch.head].at <= s.now {
			s.deliver(b, region)
		}
		if ch.head < len(ch.q) {
			next = min(next, ch.q[ch.head].at)
		}
	}
	s.due[region] = min(s.due[region], next)
}

// updateArmed arms a region whose routers now hold waiting requests: every
// stats message on its way there gets an arrival event.
func (s *simulation) updateArmed(region int) {
	waiting := false
	for _, ri := range s.byRegion[region] {
		if s.routers[ri].waiting() > 0 {
			waiting = true
			break
		}
	}
	if waiting && !s.armed[region] {
		for b := range s.backends {
			ch := &s.channels[b][region]
			for _, m := range ch.q[ch.head:] {
				s.q.push(event{at: m.at, kind: evStatsDeliver, a: int32(region), b: int32(b)})
			}
		}
	}
	s.armed[region] = waiting
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
	e := event{at: at, kind: evRouterTimer, a: int32(ri)}
	s.q.stamp(&e)
	s.timers.set(rs.timer, e)
}

// snapshotWarm keeps every worker's totals at the end of the warm-up.
func (s *simulation) snapshotWarm() {
	s.warm = make([][]engine.Totals, len(s.backends))
	for b, bs := range s.backends {
		for w := range bs.cl.Len() {
			bs.cl.Worker(w).Sync(s.now)
			s.warm[b] = append(s.warm[b], bs.cl.Worker(w).Totals())
		}
	}
}

func (s *simulation) result() *Result {
	s.sessions.each(func(ss *session) {
		if !ss.turn.Done() {
			rec := ss.turn.Record
			rec.End = s.end
			s.coll.Unfinished(rec)
		}
	})
	res := &Result{Summary: s.coll.Summary(), Events: s.events}
	per := s.coll.PerBackend(len(s.backends))
	// Engine figures cover the run; an open-loop run's cover the measured
	// part only, from the end of the warm-up to the end of the drain.
	from, to := time.Duration(0), s.end
	if s.open {
		from, to = min(s.cfg.Warmup, s.stoppedAt), s.stoppedAt
		res.Open = &OpenResult{Sent: s.nextSent(), EndS: s.stoppedAt.Seconds()}
	}
	if s.closed != nil {
		from = s.cfg.Warmup
	}
	span := (to - from).Seconds()
	var steps int64
	var allBusy time.Duration
	for b, bs := range s.backends {
		var sum engine.Totals
		for w := range bs.cl.Len() {
			bs.cl.Worker(w).Sync(to) // count the finished steps of runs still going
			t := bs.cl.Worker(w).Totals()
			if s.warm != nil {
				t = t.Minus(s.warm[b][w])
			}
			sum = sum.Plus(t)
		}
		steps += sum.Steps
		allBusy += sum.BusyTime
		st := bs.gw.TakeStats(s.end)
		var received uint64
		for _, n := range st.Received {
			received += n
		}
		br := BackendResult{
			Name: bs.spec.Name, Region: s.cfg.Regions[bs.spec.Region].Name, Workers: bs.spec.Workers,
			BackendSummary:  per[b],
			GatewayReceived: received, GatewayCompleted: st.Completed, GatewayCancelled: st.Cancelled,
			GatewayRejected: st.Rejected, GatewayActive: st.Active, GatewayWaiting: st.Waiting,
			MaxInputTPS: st.MaxInputTPS, PeakInputTPS: st.PeakInputTPS,
		}
		br.SetEngine(sum, span, bs.spec.Profile.KVTokens)
		res.Backends = append(res.Backends, br)
	}
	if s.cfg.KeepRecords {
		res.Records = s.coll.Records()
		res.Unfinished = s.coll.UnfinishedRecords()
	}
	if cr := s.closed; cr != nil {
		cr.Admitted, cr.Steps = len(s.queueS), steps
		if cr.Admitted > 0 {
			cr.GatewayQueueMeanS = s.queueSum / float64(cr.Admitted)
			slices.Sort(s.queueS)
			cr.GatewayQueueP95S = metrics.Percentile(s.queueS, 0.95)
		}
		if steps > 0 {
			cr.MeanStepS = allBusy.Seconds() / float64(steps)
		}
		res.Closed = cr
	}
	res.Dispatches, res.Marks = s.dispatches, s.marks
	if s.track {
		for _, rs := range s.routers {
			end := RouterEnd{Backends: rs.r.Backends(s.end)}
			if wr, ok := rs.r.Policy().(policy.WeightReporter); ok {
				end.Weights = wr.Weights(rs.r.Views(), nil)
			}
			res.Routers = append(res.Routers, end)
		}
	}
	return res
}

func pct(num, den float64) float64 {
	if den <= 0 {
		return 0
	}
	return 100 * num / den
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
