package router

import (
	"errors"
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// Config is a router's liveness and telemetry configuration. The zero value
// tracks no liveness: every backend stays Ready unless drained.
type Config struct {
	// HeartbeatTTL fails a backend whose last stats message or heartbeat
	// arrived longer ago than this; zero turns liveness off.
	HeartbeatTTL time.Duration `yaml:"heartbeat_ttl" json:"heartbeat_ttl"`
	// ErrorHalfLife is the decay half-life of each backend's error rate;
	// zero means DefaultErrorHalfLife.
	ErrorHalfLife time.Duration `yaml:"error_half_life" json:"error_half_life"`
	// PathStale forgets a path estimate whose last probe answered longer ago
	// than this; zero keeps it.
	PathStale time.Duration `yaml:"path_stale" json:"path_stale"`
	// Capability hides, for each request, the backends whose known
	// max_model_len it exceeds while another eligible backend fits it, for
	// every policy (policies that implement policy.CapabilityAware get it
	// whatever this says).
	Capability bool `yaml:"capability" json:"capability"`
}

// DefaultErrorHalfLife is the error rate's default decay half-life.
const DefaultErrorHalfLife = 5 * time.Second

// DefaultOverloadHalfLife is the decay half-life of each backend's share of
// overload refusals (View.Overload): short, so that the pressure a burst of
// 503s puts on a backend fades within a few seconds of its last refusal.
const DefaultOverloadHalfLife = time.Second

// DefaultHeartbeatTTL is 1.5 heartbeat intervals of 500 ms: a killed
// backend that was sending stats is Failed within 2 intervals of its death.
// It is the simulator's and the studies' TTL. (The Solyx AI Grid paper fails
// a cell after one 500 ms interval; docs/solyx.md compares the two.)
const DefaultHeartbeatTTL = 750 * time.Millisecond

// DefaultLiveHeartbeatTTL is the live router's TTL: three heartbeat
// intervals of 500 ms, so that a heartbeat delayed by a loaded host, a
// garbage collection or a TCP retransmission over a real network does not
// fail a healthy backend (the simulator's network has no such delays).
const DefaultLiveHeartbeatTTL = 1500 * time.Millisecond

// Validate reports what is wrong with the configuration.
func (c Config) Validate() error {
	if c.HeartbeatTTL < 0 || c.ErrorHalfLife < 0 || c.PathStale < 0 {
		return fmt.Errorf("router config: heartbeat_ttl, error_half_life and path_stale must be >= 0, got %v, %v and %v",
			c.HeartbeatTTL, c.ErrorHalfLife, c.PathStale)
	}
	return nil
}

func (c Config) errorHalfLife() time.Duration {
	if c.ErrorHalfLife == 0 {
		return DefaultErrorHalfLife
	}
	return c.ErrorHalfLife
}

// lifecycle is what the router reads and writes of one backend, beyond its
// view, on every stats message: its ID (which position checks), the last
// message's sequence number, the router's dispatches to it, and its
// lifecycle. It is one 64-byte cache line (TestLifecycleIsOneCacheLine), so
// that a message costs one miss here, not one per array: a fleet of 200
// backends and 15 routers delivers 27 messages per request, and at that
// size another backend's state is rarely in cache. What its answers
// taught, read far less often, is in evidence.
type lifecycle struct {
	id BackendID
	// lastSeq is the sequence number of the last stats message applied.
	lastSeq uint64
	// dispatched counts this router's dispatches to the backend, which the
	// gateway's received count is subtracted from (View.Pending).
	dispatched uint64

	adminOK bool // SetEligible's switch
	refused bool // Refused's: off until the next stats message
	drained bool // Drain's
	failed  bool
	// learning: evidence.learned has observed a refusal since it was made
	// or reset (without, it knows no limit).
	learning bool
	reported telemetry.State // the backend's own report (0: none)
	state    telemetry.State
	since    time.Duration
	heard    time.Duration // arrival of the last message

	advertised int // max_model_len from the backend
	// limit is the view's MaxModelLen, as update last set it: update
	// compares with it, and the view's line that holds MaxModelLen is
	// written only when it changes (see policy.View's layout).
	limit int
}

// evidence is what the router learned of one backend from its answers and
// probes.
type evidence struct {
	learned    gateway.LimitLearner // what its refusals proved of its limit
	errs       telemetry.ErrorRate
	errTracked bool
	// overloads is the share of answers that were overload refusals
	// (View.Overload), decaying with DefaultOverloadHalfLife.
	overloads   telemetry.ErrorRate
	overTracked bool
	path        telemetry.PathEstimator
}

// effective derives the lifecycle state.
func (l *lifecycle) effective(holds bool) telemetry.State {
	switch {
	case l.failed:
		return telemetry.Failed
	case l.drained && !holds:
		return telemetry.Terminated
	case l.drained || l.reported == telemetry.Draining:
		return telemetry.Draining
	case l.reported == telemetry.Loading:
		return telemetry.Loading
	}
	return telemetry.Ready
}

// update recomputes backend b's state at now (or at when, for a TTL expiry
// that the router notices late).
func (r *Router) update(at time.Duration, b int) {
	l, v := &r.life[b], &r.views[b]
	wasEligible, wasLimit := v.Eligible, l.limit
	st := l.effective(v.Active+v.Waiting+v.Pending > 0)
	if st != l.state {
		l.state, l.since = st, at
	}
	v.State = st
	v.Eligible = l.adminOK && st == telemetry.Ready
	limit := l.advertised
	if l.learning { // else nothing learned, and evidence is not read
		if learned := r.evidence[b].learned.Limit(at); learned > 0 && (limit == 0 || learned < limit) {
			limit = learned
		}
	}
	if limit != l.limit {
		l.limit, v.MaxModelLen = limit, limit
	}
	if v.Eligible != wasEligible || limit != wasLimit {
		r.gen++ // a waiting request's answer may change (steady)
	}
	r.touch(b)
}

// Expire fails every backend whose last message is older than the TTL at
// now. Route, OnStats and OnTimer call it; a live shell also calls it on a
// ticker (NextExpiry says when) so states are current between requests. A
// backend is Failed as of the moment its TTL ran out, however late Expire
// notices.
func (r *Router) Expire(now time.Duration) {
	ttl := r.cfg.HeartbeatTTL
	if ttl <= 0 {
		return
	}
	if now-r.expiryLow <= ttl {
		return // every backend that has not failed was heard within the TTL
	}
	low := now
	for b := range r.life {
		l := &r.life[b]
		if !l.failed && now-l.heard > ttl {
			l.failed = true
			r.update(l.heard+ttl, b)
		}
		if !l.failed {
			low = min(low, l.heard)
		}
	}
	r.expiryLow = low
}

// NextExpiry is when the next TTL runs out; ok is false when liveness is off
// or every backend has already failed.
func (r *Router) NextExpiry() (at time.Duration, ok bool) {
	if r.cfg.HeartbeatTTL <= 0 {
		return 0, false
	}
	for b := range r.life {
		if l := &r.life[b]; !l.failed && (!ok || l.heard+r.cfg.HeartbeatTTL < at) {
			at, ok = l.heard+r.cfg.HeartbeatTTL, true
		}
	}
	return at, ok
}

// heard applies a message from backend b that arrived at now.
func (r *Router) heard(now time.Duration, b int, sig *telemetry.Signals) {
	l := &r.life[b]
	l.heard = now
	r.expiryLow = min(r.expiryLow, now)
	if l.failed {
		// Back from the dead: what it learned of its limits may be stale.
		l.failed = false
		l.learning = false
		r.evidence[b].learned.Reset()
	}
	if sig != nil {
		r.views[b].Signals = sig
		l.reported = sig.State
		if sig.MaxModelLen > 0 {
			l.advertised = sig.MaxModelLen
		}
	}
	r.update(now, b)
}

// Errors of the lifecycle calls.
var (
	ErrNoBackend = errors.New("router: no such backend")
)

// Drain stops new requests to backend id; it finishes what it holds and is
// Terminated once empty.
func (r *Router) Drain(now time.Duration, id BackendID) error {
	b, ok := r.position(id)
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoBackend, id)
	}
	r.life[b].drained = true
	r.update(now, b)
	return nil
}

// Undrain returns a drained (or terminated) backend to service.
func (r *Router) Undrain(now time.Duration, id BackendID) error {
	b, ok := r.position(id)
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoBackend, id)
	}
	r.life[b].drained = false
	r.update(now, b)
	return nil
}

// Lookup returns the ID of the backend named name.
func (r *Router) Lookup(name string) (BackendID, bool) {
	if id, ok := r.byName[name]; ok {
		return id, true
	}
	return NoBackend, false
}

// ResultKind is how an attempt sent to a backend ended, as the router saw it.
type ResultKind uint8

// Result kinds.
const (
	// Succeeded: the backend answered (first token or a complete answer).
	Succeeded ResultKind = iota + 1
	// Errored: the backend failed the request (5xx, reset, timeout).
	Errored
	// Overloaded: the backend refused for load (429/503); not an error.
	Overloaded
	// TooLong: the backend refused the request as longer than its context
	// (a 400 context-length error); teaches the router its limit.
	TooLong
)

// Result is an attempt's end as the router reports it.
type Result struct {
	Kind ResultKind
	// Tokens is the request's prompt plus output tokens (TooLong).
	Tokens int
	// Limit is the maximum context the backend's error named; zero if it
	// named none (the router then learns Tokens - 1 as an upper bound).
	Limit int
}

// OnResult records how an attempt to backend id ended. Errors feed the
// backend's error rate; context-length refusals lower its known limit and
// are not counted as errors (the backend is right to refuse).
func (r *Router) OnResult(now time.Duration, id BackendID, res Result) {
	b, ok := r.position(id)
	if !ok {
		return
	}
	l := &r.evidence[b]
	switch res.Kind {
	case Succeeded, Errored:
		l.errs.Observe(now, res.Kind == Errored)
		if !l.errTracked && !l.overTracked {
			r.errTracked++
		}
		l.errTracked = true
		r.views[b].ErrorRate = l.errs.Rate(now)
		if l.overTracked {
			l.overloads.Observe(now, false)
			r.views[b].Overload = l.overloads.Rate(now)
		}
		r.touch(b)
	case Overloaded:
		l.overloads.Observe(now, true)
		if !l.errTracked && !l.overTracked {
			r.errTracked++
		}
		l.overTracked = true
		r.views[b].Overload = l.overloads.Rate(now)
		r.touch(b)
	case TooLong:
		// The shell passes only a refusal in an engine's own form
		// (gateway.ParseLimitBody); the learner weighs it against the
		// request's size and the advertised limit.
		ev := gateway.LimitEvidence{Limit: res.Limit, Requested: res.Tokens}
		if ev.Limit <= 0 {
			ev.Limit = res.Tokens - 1
		}
		r.life[b].learning = true
		if l.learned.Observe(now, ev, res.Tokens, r.life[b].advertised) {
			r.update(now, b)
		}
	}
}

// refreshErrors decays the error rates and overload shares to now (nothing
// to do, and no scan over the backends, while no result has been
// reported: r.errTracked counts the backends with either tracked).
func (r *Router) refreshErrors(now time.Duration) {
	if r.errTracked == 0 {
		return
	}
	for b := range r.evidence {
		r.refreshRates(now, b)
	}
}

// refreshRates decays backend b's error rate and overload share to now,
// as refreshErrors does for every backend (policy.DecayAware).
func (r *Router) refreshRates(now time.Duration, b int) {
	if b < 0 || b >= len(r.evidence) {
		return
	}
	if l := &r.evidence[b]; l.overTracked {
		r.views[b].Overload = l.overloads.Rate(now)
	}
	if l := &r.evidence[b]; l.errTracked {
		r.views[b].ErrorRate = l.errs.Rate(now)
	}
}

// OnProbe records a probe round trip to backend id, measured at now.
func (r *Router) OnProbe(now time.Duration, id BackendID, rtt time.Duration) {
	b, ok := r.position(id)
	if !ok {
		return
	}
	l := &r.evidence[b]
	l.path.Observe(now, rtt)
	r.views[b].Path = l.path.Path(now)
	r.touch(b)
}

// hideIncapable marks ineligible, for one pick, the eligible backends that
// do not serve model (always: the model's backends are a pool of their own),
// then those of the rest whose known limit the request exceeds, if another
// eligible backend of the pool fits it; it returns them so that decide can
// restore them.
func (r *Router) hideIncapable(req *policy.Request, model string) []int {
	r.hidden = r.hidden[:0]
	if model != "" && (!r.servedAll || r.servedGen != r.gen || r.servedModel != model) {
		all := true
		for i := range r.views {
			if Serves(r.models[i], model) {
				continue
			}
			all = false
			if r.views[i].Eligible {
				r.views[i].Eligible = false
				r.touch(i)
				r.hidden = append(r.hidden, i)
			}
		}
		// Every backend, eligible or not, serves the model: until the
		// models or the backends change (gen), a pick for it need not look
		// again, whatever else hides backends for one pick.
		r.servedAll, r.servedGen, r.servedModel = all, r.gen, model
	}
	if req.Tokens <= 0 || (!r.capAware && !r.cfg.Capability) {
		return r.hidden
	}
	if !r.limitKnown || r.limitGen != r.gen {
		r.minLimit, r.limitGen, r.limitKnown = 0, r.gen, true
		for i := range r.views {
			if l := r.views[i].MaxModelLen; l > 0 && (r.minLimit == 0 || l < r.minLimit) {
				r.minLimit = l
			}
		}
	}
	if r.minLimit == 0 || req.Tokens <= r.minLimit {
		return r.hidden // no backend's known limit is below the request
	}
	byModel := len(r.hidden)
	fits := false
	for i := range r.views {
		v := &r.views[i]
		if !v.Eligible {
			continue
		}
		if v.MaxModelLen > 0 && req.Tokens > v.MaxModelLen {
			r.hidden = append(r.hidden, i)
		} else {
			fits = true
		}
	}
	if !fits {
		r.hidden = r.hidden[:byModel]
		return r.hidden
	}
	for _, b := range r.hidden[byModel:] {
		r.views[b].Eligible = false
		r.touch(b)
	}
	return r.hidden
}

// BackendStatus is what the router knows of one backend, for
// /v1/stargate/backends and the admin API.
type BackendStatus struct {
	// ID is the backend's ID at this router.
	ID    BackendID       `json:"-"`
	Name  string          `json:"name"`
	State telemetry.State `json:"-"`
	// StateName is State in words.
	StateName string `json:"state"`
	// Since is when the backend entered its state.
	Since time.Duration `json:"since"`
	// LastHeard is when its last stats message or heartbeat arrived.
	LastHeard time.Duration `json:"last_heard"`
	Drained   bool          `json:"drained"`
	// Refused: a connection to it was refused and it takes nothing until
	// its next stats message (Router.Refused).
	Refused     bool `json:"refused,omitempty"`
	MaxModelLen int  `json:"max_model_len"`
	// LearnedLimit is the limit its context-length errors showed (0: none).
	LearnedLimit int           `json:"learned_limit"`
	ErrorRate    float64       `json:"error_rate"`
	RTT          time.Duration `json:"rtt"`
	Jitter       time.Duration `json:"jitter"`
	// Hardware reports whether its latest report had hardware signals.
	Hardware bool `json:"hardware"`
}

// Backends reports every backend's status at now, in the order of Views.
func (r *Router) Backends(now time.Duration) []BackendStatus {
	r.Expire(now)
	r.refreshErrors(now)
	out := make([]BackendStatus, len(r.views))
	for b := range r.views {
		l, v, ev := &r.life[b], &r.views[b], &r.evidence[b]
		p := ev.path.Path(now)
		out[b] = BackendStatus{ID: l.id, Name: r.names[b], State: l.state, StateName: l.state.String(), Since: l.since, LastHeard: l.heard,
			Drained: l.drained, Refused: l.refused, MaxModelLen: v.MaxModelLen, LearnedLimit: ev.learned.Limit(now), ErrorRate: v.ErrorRate,
			RTT: p.RTT, Jitter: p.Jitter, Hardware: v.Signals != nil && v.Signals.Hardware}
	}
	return out
}
