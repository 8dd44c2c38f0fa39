package gateway

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// ErrOverloaded is wrapped by every rejection for overload.
var ErrOverloaded = errors.New("gateway: overloaded")

// Config is the admission configuration of one backend.
type Config struct {
	// MaxConcurrency is how many requests the engine may hold; zero means
	// SlotsPerWorker x workers.
	MaxConcurrency int `yaml:"max_concurrency" json:"max_concurrency"`
	// SlotsPerWorker sets the default MaxConcurrency.
	SlotsPerWorker int `yaml:"slots_per_worker" json:"slots_per_worker"`
	// MaxWaitingFactor bounds waiting requests to this many times MaxConcurrency.
	MaxWaitingFactor float64 `yaml:"max_waiting_factor" json:"max_waiting_factor"`
	// MaxEstimatedWait rejects a request whose estimated wait exceeds it.
	MaxEstimatedWait time.Duration `yaml:"max_estimated_wait" json:"max_estimated_wait"`
	// InitialServiceTime is the mean service time assumed before any finishes.
	InitialServiceTime time.Duration `yaml:"initial_service_time" json:"initial_service_time"`
	// StatsCoalesce is the least time between two change-driven stats messages.
	StatsCoalesce time.Duration `yaml:"stats_coalesce" json:"stats_coalesce"`
	// HeartbeatInterval is the most time between two stats messages.
	HeartbeatInterval time.Duration `yaml:"heartbeat_interval" json:"heartbeat_interval"`
	// TPSMinRequests is how many requests a TPS window needs to count.
	TPSMinRequests int `yaml:"tps_min_requests" json:"tps_min_requests"`
	// TPSPeakHalfLife is the decay half-life of MaxInputTPS.
	TPSPeakHalfLife time.Duration `yaml:"tps_peak_half_life" json:"tps_peak_half_life"`
	// WarmUp is how long the backend stays Loading after its engine serves
	// again, once the gateway saw it not serving (see ObserveEngine).
	WarmUp time.Duration `yaml:"warm_up" json:"warm_up"`
}

// DefaultConfig returns DESIGN's gateway settings.
func DefaultConfig() Config {
	return Config{
		SlotsPerWorker:     25,
		MaxWaitingFactor:   4.0,
		MaxEstimatedWait:   10 * time.Second,
		InitialServiceTime: 2 * time.Second,
		StatsCoalesce:      10 * time.Millisecond,
		HeartbeatInterval:  500 * time.Millisecond,
		TPSMinRequests:     20,
		TPSPeakHalfLife:    0,
		WarmUp:             DefaultWarmUp,
	}
}

// Validate reports what is wrong with a configuration.
func (c Config) Validate() error {
	var errs []error
	if c.MaxConcurrency < 0 {
		errs = append(errs, fmt.Errorf("max_concurrency must be >= 0 (0 means slots_per_worker x workers), got %d", c.MaxConcurrency))
	}
	if c.MaxConcurrency == 0 && c.SlotsPerWorker < 1 {
		errs = append(errs, fmt.Errorf("slots_per_worker must be >= 1, got %d", c.SlotsPerWorker))
	}
	if !(c.MaxWaitingFactor >= 0) || math.IsInf(c.MaxWaitingFactor, 0) { // also NaN
		errs = append(errs, fmt.Errorf("max_waiting_factor must be a finite number >= 0, got %v", c.MaxWaitingFactor))
	}
	if c.MaxEstimatedWait <= 0 {
		errs = append(errs, fmt.Errorf("max_estimated_wait must be > 0, got %v", c.MaxEstimatedWait))
	}
	if c.InitialServiceTime <= 0 {
		errs = append(errs, fmt.Errorf("initial_service_time must be > 0, got %v", c.InitialServiceTime))
	}
	if c.StatsCoalesce < 0 {
		errs = append(errs, fmt.Errorf("stats_coalesce must be >= 0, got %v", c.StatsCoalesce))
	}
	if c.HeartbeatInterval <= 0 {
		errs = append(errs, fmt.Errorf("heartbeat_interval must be > 0, got %v", c.HeartbeatInterval))
	}
	if c.TPSMinRequests < 1 {
		errs = append(errs, fmt.Errorf("tps_min_requests must be >= 1, got %d", c.TPSMinRequests))
	}
	if c.TPSPeakHalfLife < 0 {
		errs = append(errs, fmt.Errorf("tps_peak_half_life must be >= 0 (0: the peak never decays), got %v", c.TPSPeakHalfLife))
	}
	if c.WarmUp < 0 {
		errs = append(errs, fmt.Errorf("warm_up must be >= 0 (0: Ready as soon as the engine serves), got %v", c.WarmUp))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway config: %w", err)
	}
	return nil
}

// Request is what the gateway needs to know about a request.
type Request struct {
	ID           uint64
	Router       int // index of the router that sent it, for Stats.Received
	PromptTokens int
	queued       time.Duration // when Offer queued it
}

// Decision is the outcome of Offer.
type Decision uint8

// Offer outcomes.
const (
	Admit Decision = iota + 1
	Queue
	Reject
)

// Stats is the message a gateway sends to routers. It is immutable once
// built and may be shared.
type Stats struct {
	Backend     int
	Seq         uint64
	At          time.Duration
	Capacity    int
	Active      int
	Waiting     int
	InputTPS    float64
	MaxInputTPS float64
	// PeakInputTPS is the highest InputTPS seen (see Config.TPSPeakHalfLife).
	PeakInputTPS float64
	// Received[r] counts the requests router r has sent that reached this
	// gateway, so that a router can tell which of its dispatches the stats
	// already include.
	Received  []uint64
	Completed uint64
	Rejected  uint64
	Cancelled uint64
	// Signals is the backend's latest telemetry report (nil if it sends
	// none), shared between messages until the next report replaces it.
	Signals *telemetry.Signals
}

// MaxRouters bounds the routers whose requests a gateway counts apart
// (Stats.Received); a request from any other (Request.Router < 0 or >=
// MaxRouters) is admitted the same but counted for none.
const MaxRouters = 256

// Gateway is the admission state of one backend.
type Gateway struct {
	cfg      Config
	backend  int
	capacity int
	// full is the capacity with every worker admissible; workers and
	// admissible count the workers (see SetAdmissible).
	full, workers, admissible int
	// unanswered holds the admitted requests the shell said await their
	// first token, with when (see AwaitFirstToken).
	unanswered map[uint64]time.Duration

	active  map[uint64]time.Duration // admitted request -> admission time
	waiting []Request

	meanService float64 // seconds

	received                       []uint64
	completed, rejected, cancelled uint64

	tps     tpsMeter
	peakTPS float64
	peakAt  time.Duration
	maxTPS  float64 // the latest counted maximum input TPS (see doc.go)

	signals *telemetry.Signals
	// advertised is the max_model_len of the last report, learned the
	// context limit the engine's refusals proved (LimitLearner's rule);
	// every report carries the lower.
	advertised int
	learned    LimitLearner
	// life is the engine's loading state (ObserveEngine).
	life lifecycle

	seq        uint64
	dirty      bool
	lastSent   time.Duration
	everSent   bool
	lastChange time.Duration
}

// New returns the gateway of backend index backend with the given workers.
func New(backend, workers int, cfg Config) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if workers < 1 {
		return nil, fmt.Errorf("gateway: backend %d needs at least one worker, got %d", backend, workers)
	}
	capacity := cfg.MaxConcurrency
	if capacity == 0 {
		capacity = cfg.SlotsPerWorker * workers
	}
	return &Gateway{
		cfg: cfg, backend: backend, capacity: capacity, full: capacity, workers: workers, admissible: workers,
		unanswered:  make(map[uint64]time.Duration),
		active:      make(map[uint64]time.Duration, capacity),
		meanService: cfg.InitialServiceTime.Seconds(),
		tps:         newTPSMeter(cfg.TPSMinRequests),
		learned:     NewLimitLearner(LimitConfig{}),
	}, nil
}

// Capacity is the maximum engine concurrency.
func (g *Gateway) Capacity() int { return g.capacity }

// Active is the number of admitted requests.
func (g *Gateway) Active() int { return len(g.active) }

// Waiting is the number of queued requests.
func (g *Gateway) Waiting() int { return len(g.waiting) }

// EstimatedWait is how long a request arriving now would wait for a slot.
func (g *Gateway) EstimatedWait() time.Duration {
	if g.capacity == 0 { // no admissible worker: a slot's return is unknown
		return time.Duration(g.meanService * float64(time.Second))
	}
	if len(g.active) < g.capacity {
		return 0
	}
	s := float64(len(g.waiting)+1) * g.meanService / float64(g.capacity)
	return time.Duration(s * float64(time.Second))
}

// Offer decides what happens to an arriving request. A rejection's error
// wraps ErrOverloaded and says why.
func (g *Gateway) Offer(now time.Duration, r Request) (Decision, error) {
	g.countReceived(r.Router)
	g.changed(now)
	if len(g.active) < g.capacity && len(g.waiting) == 0 && !g.life.notServing {
		g.active[r.ID] = now
		return Admit, nil
	}
	if g.life.notServing {
		g.rejected++
		return Reject, g.notServingErr()
	}
	if g.capacity == 0 {
		g.rejected++
		return Reject, fmt.Errorf("%w: backend %d has no admissible worker (all %d quarantined or unreachable)", ErrOverloaded, g.backend, g.workers)
	}
	if limit := g.cfg.MaxWaitingFactor * float64(g.capacity); float64(len(g.waiting)) >= limit {
		g.rejected++
		return Reject, fmt.Errorf("%w: backend %d has %d requests waiting (limit %.0f)", ErrOverloaded, g.backend, len(g.waiting), limit)
	}
	if est := g.EstimatedWait(); est > g.cfg.MaxEstimatedWait {
		g.rejected++
		return Reject, fmt.Errorf("%w: backend %d estimated wait %v exceeds %v", ErrOverloaded, g.backend, est.Round(time.Millisecond), g.cfg.MaxEstimatedWait)
	}
	r.queued = now
	g.waiting = append(g.waiting, r)
	return Queue, nil
}

func (g *Gateway) countReceived(router int) {
	if router < 0 || router >= MaxRouters {
		return
	}
	for len(g.received) <= router {
		g.received = append(g.received, 0)
	}
	g.received[router]++
}

// Finish records that an admitted request finished with promptTokens of
// input, and admits queued requests into the freed slot. It appends the
// newly admitted requests to out and returns it.
func (g *Gateway) Finish(now time.Duration, id uint64, promptTokens int, out []Request) []Request {
	start, ok := g.active[id]
	if !ok {
		return out
	}
	delete(g.active, id)
	delete(g.unanswered, id)
	g.completed++
	g.meanService += 0.1 * ((now - start).Seconds() - g.meanService)
	g.tps.add(now, promptTokens, now-start)
	g.updatePeak(now)
	g.changed(now)
	return g.admitWaiting(now, out)
}

// Cancel drops a request, admitted or queued, and admits queued requests into
// a freed slot. wasActive says whether it held an engine slot (the caller must
// then cancel it in the engine too).
func (g *Gateway) Cancel(now time.Duration, id uint64, out []Request) (wasActive bool, admitted []Request) {
	if _, ok := g.active[id]; ok {
		delete(g.active, id)
		delete(g.unanswered, id)
		g.cancelled++
		g.changed(now)
		return true, g.admitWaiting(now, out)
	}
	for i, r := range g.waiting {
		if r.ID == id {
			g.waiting = append(g.waiting[:i], g.waiting[i+1:]...)
			g.cancelled++
			g.changed(now)
			return false, out
		}
	}
	return false, out
}

func (g *Gateway) admitWaiting(now time.Duration, out []Request) []Request {
	if g.life.notServing {
		return out
	}
	n := 0
	for n < len(g.waiting) && len(g.active) < g.capacity {
		r := g.waiting[n]
		g.active[r.ID] = now
		out = append(out, r)
		n++
	}
	if n > 0 {
		g.waiting = g.waiting[:copy(g.waiting, g.waiting[n:])]
	}
	return out
}

func (g *Gateway) changed(now time.Duration) {
	if !g.dirty {
		g.dirty = true
		g.lastChange = now
	}
}

// updatePeak folds the current rate into the decaying peak, but only a rate
// from a window with enough requests: a few requests in a short span say
// nothing about capacity. It also refreshes the maximum input TPS: input
// tokens per engine-slot second over the fallback window, times the slots.
func (g *Gateway) updatePeak(now time.Duration) {
	rate, counted := g.tps.rate(now)
	g.peakTPS = g.decayedPeak(now)
	if counted {
		g.peakTPS = max(g.peakTPS, rate)
	}
	g.peakAt = now
	if perSlot, ok := g.tps.perSlot(now); ok {
		g.maxTPS = perSlot * float64(g.capacity)
	}
}

func (g *Gateway) decayedPeak(now time.Duration) float64 {
	if g.cfg.TPSPeakHalfLife == 0 {
		return g.peakTPS
	}
	return g.peakTPS * math.Exp2(-(now-g.peakAt).Seconds()/g.cfg.TPSPeakHalfLife.Seconds())
}

// SetSignals attaches a telemetry report to the stats messages from now on
// and sends it with the next one (it counts as a change). The report must
// not be modified afterwards.
func (g *Gateway) SetSignals(now time.Duration, sig *telemetry.Signals) {
	if sig != nil {
		g.advertised = sig.MaxModelLen
	}
	g.signals = g.withLearned(now, g.withTTFTFloor(now, sig))
	g.changed(now)
}

// LearnLimit weighs an engine's context-length refusal (ev) of a request
// this gateway counted needed tokens for, by LimitLearner's rule: a limit
// it proves, when below what the gateway knew, goes out with the next stats
// message, soon after (a change), rather than at the next telemetry report:
// each router that still thinks the backend takes longer prompts sends it
// one more refusal until it hears. It reports whether the limit was news.
func (g *Gateway) LearnLimit(now time.Duration, ev LimitEvidence, needed int) bool {
	if !g.learned.Observe(now, ev, needed, g.advertised) {
		return false
	}
	if g.signals != nil {
		g.signals = g.withLearned(now, g.signals)
		g.changed(now)
	}
	return true
}

// Advertise sets the engine's advertised max_model_len before any
// telemetry report carries it (the floor of LimitLearner's rule).
func (g *Gateway) Advertise(maxModelLen int) {
	if g.advertised == 0 {
		g.advertised = maxModelLen
	}
}

// Learned is the context limit the engine's refusals proved, at now (0:
// none, or it lapsed).
func (g *Gateway) Learned(now time.Duration) int { return g.learned.Limit(now) }

// withLearned is sig with the learned limit applied (a copy if it changes).
func (g *Gateway) withLearned(now time.Duration, sig *telemetry.Signals) *telemetry.Signals {
	learned := g.learned.Limit(now)
	if sig == nil || learned == 0 || (sig.MaxModelLen > 0 && sig.MaxModelLen <= learned) {
		return sig
	}
	c := *sig
	c.MaxModelLen = learned
	return &c
}

// NextStatsAt is when the next stats message is due: soon after a change
// (coalesced), or at the heartbeat interval.
func (g *Gateway) NextStatsAt() time.Duration {
	if !g.everSent {
		return 0
	}
	next := g.lastSent + g.cfg.HeartbeatInterval
	if g.dirty {
		next = max(g.lastChange, g.lastSent+g.cfg.StatsCoalesce)
	}
	if w := g.life.warmUntil; g.life.sawDown && w > g.lastSent && w < next {
		next = w // Ready goes out when the warm-up ends
	}
	return next
}

// TakeStats builds the stats message for now and marks it sent.
func (g *Gateway) TakeStats(now time.Duration) *Stats { return g.TakeStatsInto(now, nil) }

// TakeStatsInto is TakeStats writing the message over reuse, a message from
// an earlier TakeStats or TakeStatsInto that nothing reads any more, instead
// of allocating one (nil: allocate). The simulator recycles the messages it
// has delivered this way.
func (g *Gateway) TakeStatsInto(now time.Duration, reuse *Stats) *Stats {
	g.seq++
	g.dirty = false
	g.lastSent = now
	g.everSent = true
	rate, _ := g.tps.rate(now)
	st := reuse
	switch {
	case st != nil && cap(st.Received) >= len(g.received):
		*st = Stats{Received: st.Received[:len(g.received)]}
	case len(g.received) <= smallReceived:
		// One allocation for the message and its counts: gateways send many.
		sm := &statsSmall{}
		st = &sm.Stats
		st.Received = sm.buf[:len(g.received)]
	default:
		st = &Stats{Received: make([]uint64, len(g.received))}
	}
	copy(st.Received, g.received)
	st.Backend, st.Seq, st.At, st.Capacity = g.backend, g.seq, now, g.capacity
	st.Active, st.Waiting, st.InputTPS, st.MaxInputTPS = len(g.active), len(g.waiting), rate, g.maxTPS
	st.PeakInputTPS = g.decayedPeak(now)
	st.Completed, st.Rejected, st.Cancelled = g.completed, g.rejected, g.cancelled
	st.Signals = g.signals
	if g.capacity == 0 || g.Loading(now) {
		st.Signals = g.loadingSignals()
	}
	return st
}

const smallReceived = 16

type statsSmall struct {
	Stats
	buf [smallReceived]uint64
}
