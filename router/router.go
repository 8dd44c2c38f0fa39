package router

import (
	"fmt"
	"slices"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// DefaultMaxAttempts is how many backends a router tries for one request
// before its first byte (a refused connection, an overload answer or a
// context-length refusal moves it to a backend not yet tried); the live
// router and the simulator's routers both default to it.
const DefaultMaxAttempts = 3

// Backend is what a router knows about a backend before any stats.
type Backend struct {
	Name     string
	Capacity int
	// CacheTokens is the backend's whole prefix-cache capacity in tokens
	// (policy.View.CacheTokens); zero: unknown.
	CacheTokens int
	// MaxModelLen is the backend's limit from /v1/models; zero: unknown.
	MaxModelLen int
	// Models are the model ids its /v1/models lists (LoRA adapters
	// included); none means it takes every model (see Serves).
	Models []string
}

// BackendID names a backend at a router for its whole life: it never changes
// while the backend stays, and is never given to another backend. The
// backends a router is built with get IDs 0, 1, ... in order; Add gives each
// new backend the next one.
type BackendID uint64

// NoBackend is the Backend of a decision that names none (Reject).
const NoBackend = ^BackendID(0)

// Decision is the router's answer about a request: a policy's decision with
// the backend named by its ID.
type Decision struct {
	Kind policy.Kind
	// Backend is where to dispatch, or which backend's queue the request
	// waits in; NoBackend on Reject.
	Backend BackendID
	// Until is when the request is asked again at the latest (Wait only).
	Until time.Duration
	// Reason says why a request was rejected.
	Reason string
}

// Ask is a request as the router places it.
type Ask struct {
	// Session is the hash of the request's session key.
	Session uint64
	// Tokens is the request's prompt plus output tokens (0: unknown), which
	// the capability filter compares with each backend's max_model_len.
	Tokens int
	// Exclude lists the backends that already refused the request (a retry
	// before its first byte; see Retry): the policy skips them. IDs the
	// router no longer knows are ignored.
	Exclude []BackendID
	// Again marks a retry (Retry's Step.Again): the request was placed
	// before, so its pick is not an arrival at this router
	// (policy.Request.Arrival).
	Again bool
	// Blocks are the prompt's chained block hashes, BlockTokens tokens
	// each (nil: unknown), for a policy that places by cached prefix
	// (policy.Prefix). The router keeps the slice while the request waits.
	Blocks      []uint64
	BlockTokens int
	// Model is the request's model ("": any backend may take it). Only the
	// backends that serve it (Serves) are candidates, and the policy
	// weighs them as a pool of their own.
	Model string
	// Pool, if set, restricts the candidates to the backends of that pool
	// (SetPools), the same way Model does.
	Pool string
}

// Outcome is a decision about a request that was waiting.
type Outcome struct {
	ID       uint64
	Decision Decision
}

type waiter struct {
	id    uint64
	req   policy.Request // QueuedAt and Exclude are positions, kept current by Remove
	until time.Duration
	model string
	pool  string
	// What the wait depends on, under a policy.Watcher (see steady): the
	// backends whose free slot would end it, the policy's own Until, and
	// the router's generations of eligibility and weights it saw.
	watched     bool
	tps         bool
	watch       []int
	polUntil    time.Duration
	gen, tpsGen uint64
}

// Router is one router replica.
type Router struct {
	id  int
	cfg Config
	pol policy.Policy
	// Per backend, by position (the policy's view index): positions move
	// when a backend is removed; IDs do not.
	names    []string
	models   [][]string
	views    []policy.View
	life     []lifecycle // each backend's ID, sequence, dispatches and lifecycle: one cache line
	evidence []evidence
	// errTracked counts the backends whose error rate or overload share is
	// tracked (lifecycle.errTracked, overTracked): with none, a pick
	// refreshes neither.
	errTracked int
	pos        map[BackendID]int
	byName     map[string]BackendID // Lookup's index
	nextID     BackendID
	waiters    []waiter
	// waits summarises the waiters for NextTimer and retry's shortcut.
	waits    waitSummary
	capAware bool
	hidden   []int // scratch: backends hidden from one pick by the capability filter
	pools    pools // backend name to pool (pools.go)
	// watcher is the policy as a policy.Watcher, nil if it is not one;
	// tracker as a policy.Tracker, told of every change of a view (touch).
	watcher policy.Watcher
	tracker policy.Tracker
	// errorBlind: the policy never reads the error rates (policy.ErrorBlind),
	// so a pick need not decay them first.
	errorBlind bool
	// decayer: the policy decays the rates of the backends it reads
	// itself, through refreshRates, unless DecaysAll says otherwise.
	decayer policy.DecayAware
	// What hideIncapable knows at generation gen: every backend serves
	// servedModel (servedAll), and no known limit is below minLimit.
	servedGen, limitGen   uint64
	servedModel           string
	servedAll, limitKnown bool
	minLimit              int
	// gen counts the changes of any backend's eligibility, capacity, limit
	// or models, of the membership, and of a slot freed other than by a
	// stats message; tpsGen those of a MaxInputTPS. A waiter asked at
	// other generations is asked again (steady).
	gen, tpsGen uint64
	spare       [][]int       // watch lists of waiters gone, for reuse
	scratch     waiter        // Route's request while it is decided
	expiryLow   time.Duration // no backend that has not failed was heard before this (Expire)
}

// New returns router number id (its index in the gateways' Received counts)
// placing with pol over backends, in the order pol was built with; they get
// BackendIDs 0, 1, ... in that order. It tracks no liveness: every backend
// is Ready until told otherwise (NewWith).
func New(id int, pol policy.Policy, backends []Backend) (*Router, error) {
	return NewWith(id, pol, backends, Config{})
}

// NewWith is New with a configuration. The router's clock starts at 0: a
// backend not heard from by HeartbeatTTL is Failed.
func NewWith(id int, pol policy.Policy, backends []Backend, cfg Config) (*Router, error) {
	if len(backends) == 0 {
		return nil, fmt.Errorf("router %d: no backends", id)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router %d: %w", id, err)
	}
	r := &Router{id: id, cfg: cfg, pol: pol, pos: make(map[BackendID]int, len(backends)), byName: make(map[string]BackendID, len(backends))}
	if ca, ok := pol.(policy.CapabilityAware); ok && ca.CapabilityAware() {
		r.capAware = true
	}
	r.watcher, _ = pol.(policy.Watcher)
	r.tracker, _ = pol.(policy.Tracker)
	_, r.errorBlind = pol.(policy.ErrorBlind)
	if da, ok := pol.(policy.DecayAware); ok {
		r.decayer = da
		da.SetDecay(cfg.errorHalfLife(), DefaultOverloadHalfLife, r.refreshRates)
	}
	for _, b := range backends {
		if err := r.check(b); err != nil {
			return nil, err
		}
		r.append(0, b)
	}
	if r.tracker != nil {
		r.tracker.Track(r.views)
	}
	return r, nil
}

// touch tells a policy.Tracker that view i changed.
func (r *Router) touch(i int) {
	if r.tracker != nil {
		r.tracker.Touched(r.views, i)
	}
}

func (r *Router) check(b Backend) error {
	if b.Capacity < 1 {
		return fmt.Errorf("router %d: backend %q has capacity %d, want >= 1", r.id, b.Name, b.Capacity)
	}
	if b.MaxModelLen < 0 {
		return fmt.Errorf("router %d: backend %q has max_model_len %d, want >= 0 (0: unknown)", r.id, b.Name, b.MaxModelLen)
	}
	return nil
}

// append adds backend b, heard from at now, under the next ID.
func (r *Router) append(now time.Duration, b Backend) BackendID {
	id, i := r.nextID, len(r.views)
	r.nextID++
	r.gen++
	r.expiryLow = min(r.expiryLow, now)
	r.pos[id] = i
	if _, dup := r.byName[b.Name]; !dup { // the first of two with one name, as Lookup found it
		r.byName[b.Name] = id
	}
	r.names = append(r.names, b.Name)
	r.models = append(r.models, slices.Clone(b.Models))
	r.views = append(r.views, policy.View{Index: i, Key: policy.KeyOf(b.Name), Capacity: b.Capacity, CacheTokens: b.CacheTokens, Eligible: true,
		State: telemetry.Ready, MaxModelLen: b.MaxModelLen})
	r.life = append(r.life, lifecycle{id: id, adminOK: true, state: telemetry.Ready, since: now, heard: now, advertised: b.MaxModelLen, limit: b.MaxModelLen})
	r.evidence = append(r.evidence, evidence{errs: telemetry.ErrorRate{HalfLife: r.cfg.errorHalfLife()},
		overloads: telemetry.ErrorRate{HalfLife: DefaultOverloadHalfLife}, path: telemetry.PathEstimator{Stale: r.cfg.PathStale}})
	return id
}

// position is backend id's current position; ok is false for an ID the
// router does not know (never given, or removed).
func (r *Router) position(id BackendID) (int, bool) {
	if id < BackendID(len(r.life)) && r.life[id].id == id { // no backend removed before it
		return int(id), true
	}
	i, ok := r.pos[id]
	return i, ok
}

// Prefetch reads the parts of backend id's state that OnStats reads
// first, changing nothing, and returns a value derived from them that the
// caller keeps (so the reads are not optimised away). A shell with a batch
// of stats messages to deliver calls it for every message before it
// delivers any: the memory fetches of the whole batch then overlap instead
// of coming one after another, which is most of a delivery's cost when a
// fleet's router state is larger than the processor's caches.
func (r *Router) Prefetch(id BackendID) uint64 {
	b, ok := r.position(id)
	if !ok {
		return 0
	}
	v := &r.views[b] // its first 64 bytes may span two lines: read both ends
	x := r.life[b].lastSeq + uint64(v.Capacity) + uint64(v.State)
	if r.tracker != nil {
		x += r.tracker.Prefetch(b)
	}
	return x
}

// Add makes backend b a member from now on, without touching the state of
// the others (their pending counts, error rates, lifecycle, the policy's
// per-backend state), and returns its ID. It is Ready and counts as heard at
// now. Waiting requests are asked again, since the new backend may take
// them; the decided ones are appended to out.
func (r *Router) Add(now time.Duration, b Backend, out []Outcome) (BackendID, []Outcome, error) {
	if err := r.check(b); err != nil {
		return NoBackend, out, err
	}
	if _, ok := r.Lookup(b.Name); ok {
		return NoBackend, out, fmt.Errorf("router %d: backend %q is already a member", r.id, b.Name)
	}
	id := r.append(now, b)
	r.membershipChanged(nil)
	return id, r.retry(now, false, -1, out), nil
}

// Remove forgets backend id: its state goes with it, every other backend
// keeps its own. A request waiting in its queue is asked again, as is every
// waiting request; the decided ones are appended to out.
func (r *Router) Remove(now time.Duration, id BackendID, out []Outcome) ([]Outcome, error) {
	p, ok := r.position(id)
	if !ok {
		return out, fmt.Errorf("%w: %d", ErrNoBackend, id)
	}
	for i := range r.waiters {
		w := &r.waiters[i]
		if w.req.QueuedAt == p {
			w.req.QueuedAt = -1
		} else if w.req.QueuedAt > p {
			w.req.QueuedAt--
		}
		kept := w.req.Exclude[:0]
		for _, x := range w.req.Exclude {
			switch {
			case x < p:
				kept = append(kept, x)
			case x > p:
				kept = append(kept, x-1)
			}
		}
		w.req.Exclude = kept
	}
	r.gen++
	delete(r.pos, id)
	if name := r.names[p]; r.byName[name] == id {
		delete(r.byName, name)
		for i, n := range r.names { // another backend of that name, if any, is found now
			if i != p && n == name {
				r.byName[n] = r.life[i].id
				break
			}
		}
	}
	r.names = slices.Delete(r.names, p, p+1)
	r.models = slices.Delete(r.models, p, p+1)
	r.views = slices.Delete(r.views, p, p+1)
	if r.evidence[p].errTracked || r.evidence[p].overTracked {
		r.errTracked--
	}
	r.life = slices.Delete(r.life, p, p+1)
	r.evidence = slices.Delete(r.evidence, p, p+1)
	for i := p; i < len(r.life); i++ {
		r.pos[r.life[i].id] = i
		r.views[i].Index = i
	}
	r.membershipChanged(func(i int) int {
		if i >= p {
			return i + 1
		}
		return i
	})
	return r.retry(now, false, -1, out), nil
}

// membershipChanged tells a policy with per-backend state
// (policy.Membership) its new backends; from maps a backend's new position
// to its old one (nil: none moved, any past the old end joined).
func (r *Router) membershipChanged(from func(int) int) {
	if r.tracker != nil {
		defer r.tracker.Track(r.views)
	}
	m, ok := r.pol.(policy.Membership)
	if !ok {
		return
	}
	bs := make([]policy.Backend, len(r.views))
	moved := make([]int, len(r.views))
	for i := range r.views {
		bs[i] = policy.Backend{Name: r.names[i], Key: r.views[i].Key}
		moved[i] = i
		if from != nil {
			moved[i] = from(i)
		}
	}
	if from == nil && len(moved) > 0 {
		moved[len(moved)-1] = -1 // Add appends one
	}
	m.SetBackends(bs, moved)
}

// Restarted tells the router backend id's gateway started again: its
// received counts start from zero, so this router's dispatches to it count
// from zero too, and its next stats message is taken whatever its Seq.
func (r *Router) Restarted(id BackendID) error {
	p, ok := r.position(id)
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoBackend, id)
	}
	r.life[p].lastSeq, r.life[p].dispatched, r.views[p].Pending = 0, 0, 0
	r.gen++ // a slot may be free
	r.touch(p)
	return nil
}

// Advertise sets the max_model_len backend id reports (0: unknown).
func (r *Router) Advertise(now time.Duration, id BackendID, maxModelLen int) error {
	p, ok := r.position(id)
	if !ok || maxModelLen < 0 {
		return fmt.Errorf("%w: %d (max_model_len %d)", ErrNoBackend, id, maxModelLen)
	}
	r.life[p].advertised = maxModelLen
	r.update(now, p)
	return nil
}

// ID is the ID of the backend at position i of Views.
func (r *Router) ID(i int) BackendID { return r.life[i].id }

// Policy returns the router's policy.
func (r *Router) Policy() policy.Policy { return r.pol }

// Views returns the router's current views, by position (see ID); the
// caller must not modify them.
func (r *Router) Views() []policy.View { return r.views }

// Waiting is the number of requests waiting at this router.
func (r *Router) Waiting() int { return len(r.waiters) }

// Refused keeps backend id from new requests until its next stats message
// (OnStats, whatever that message holds): a connection to it was refused,
// the retry rule's Step.Disable. Both shells call it, so the rule of when
// the backend comes back is written once. It reports whether the backend
// was taken out now (false when it already was, or is unknown).
func (r *Router) Refused(id BackendID) bool {
	b, known := r.position(id)
	if !known || r.life[b].refused {
		return false
	}
	r.life[b].refused = true
	r.SetEligible(id, false)
	return true
}

// SetEligible marks a backend as able or unable to take new requests, on top
// of its lifecycle state (an operator's switch; Drain is the lifecycle's).
func (r *Router) SetEligible(id BackendID, ok bool) {
	b, known := r.position(id)
	if !known {
		return
	}
	r.life[b].adminOK = ok
	was := r.views[b].Eligible
	r.views[b].Eligible = ok && r.views[b].State == telemetry.Ready
	if r.views[b].Eligible != was {
		r.gen++
		r.touch(b)
	}
}

// Route places a request arriving now; it is the router's one entry point
// for placing. On Wait the router keeps the request and reports its fate
// later through OnStats, OnTimer, Add or Remove.
func (r *Router) Route(now time.Duration, id uint64, q Ask) Decision {
	r.Expire(now)
	// The router's own scratch waiter: a local one would escape to the
	// heap through the policy, one allocation per request.
	w := &r.scratch
	*w = waiter{id: id, req: policy.Request{Session: q.Session, Arrived: now, QueuedAt: -1, Tokens: q.Tokens, Arrival: !q.Again}, model: q.Model, pool: q.Pool}
	if n := len(r.spare); n > 0 && r.watcher != nil {
		w.watch, r.spare = r.spare[n-1], r.spare[:n-1]
	}
	if len(q.Exclude) > 0 {
		w.req.Exclude = make([]int, 0, len(q.Exclude))
		for _, x := range q.Exclude {
			if p, ok := r.position(x); ok {
				w.req.Exclude = append(w.req.Exclude, p)
			}
		}
	}
	w.req.Blocks, w.req.BlockTokens = q.Blocks, q.BlockTokens
	d := r.decide(now, w)
	w.req.Arrival = false // its later picks, while it waits, are not arrivals
	if d.Kind == policy.Wait {
		if len(r.waiters) == 0 {
			r.waits.reset(len(r.views))
		}
		r.waits.add(w)
		r.waiters = append(r.waiters, *w)
	} else {
		r.recycle(w)
	}
	*w = waiter{}
	return d
}

// decide asks the policy and applies the decision to the views.
func (r *Router) decide(now time.Duration, w *waiter) Decision {
	if len(r.views) == 0 { // every backend was removed
		return Decision{Kind: policy.Reject, Backend: NoBackend, Reason: "no backends"}
	}
	if !r.errorBlind && (r.decayer == nil || r.decayer.DecaysAll(len(r.views))) {
		r.refreshErrors(now)
	}
	outside := r.hideOutsidePool(w.pool)
	hidden := r.hideIncapable(&w.req, w.model)
	d := r.pol.Pick(now, &w.req, r.views)
	w.watched = false
	if d.Kind == policy.Wait && r.watcher != nil {
		w.watch, w.tps = r.watcher.Watch(now, &w.req, r.views, d, w.watch[:0])
		w.watched, w.polUntil, w.gen, w.tpsGen = true, d.Until, r.gen, r.tpsGen
	}
	for _, b := range hidden {
		r.views[b].Eligible = true
		r.touch(b)
	}
	for _, b := range outside {
		r.views[b].Eligible = true
		r.touch(b)
	}
	// The router never sends to a backend that is not Ready, whatever the
	// policy says.
	if d.Kind == policy.Dispatch && (d.Backend < 0 || d.Backend >= len(r.views) || !r.views[d.Backend].Eligible) {
		d = policy.Decision{Kind: policy.Reject, Backend: -1, Reason: fmt.Sprintf("policy %s chose backend %d, which is not eligible", r.pol.Name(), d.Backend)}
	}
	if w.req.QueuedAt >= 0 && (d.Kind != policy.Wait || d.Backend != w.req.QueuedAt) {
		r.views[w.req.QueuedAt].Queued--
		r.touch(w.req.QueuedAt)
		w.req.QueuedAt = -1
	}
	out := Decision{Kind: d.Kind, Backend: NoBackend, Until: d.Until, Reason: d.Reason}
	switch d.Kind {
	case policy.Dispatch:
		r.life[d.Backend].dispatched++
		r.views[d.Backend].Pending++
		r.touch(d.Backend)
		out.Backend = r.life[d.Backend].id
	case policy.Wait:
		if d.Backend < 0 || d.Backend >= len(r.views) {
			return Decision{Kind: policy.Reject, Backend: NoBackend, Reason: fmt.Sprintf("policy %s queued at backend %d, which does not exist", r.pol.Name(), d.Backend)}
		}
		if w.req.QueuedAt < 0 {
			w.req.QueuedAt = d.Backend
			r.views[d.Backend].Queued++
			r.touch(d.Backend)
		}
		w.until = max(d.Until, now+time.Millisecond)
		out.Backend = r.life[d.Backend].id
	}
	return out
}

// OthersFit reports whether a backend other than id may hold a request of
// tokens, by the limits this router knows (advertised or learned); an id
// the router does not know (NoBackend, or one removed) excludes none.
func (r *Router) OthersFit(id BackendID, tokens int) bool { return r.OthersFitModel(id, tokens, "") }

// OthersFitModel is OthersFit among the backends that serve model.
func (r *Router) OthersFitModel(id BackendID, tokens int, model string) bool {
	b, ok := r.position(id)
	if !ok {
		b = -1
	}
	for i := range r.views {
		if i != b && Serves(r.models[i], model) && (r.views[i].MaxModelLen == 0 || tokens <= r.views[i].MaxModelLen) {
			return true
		}
	}
	return false
}

// Undispatch takes back a dispatch to backend id that is known never to
// have reached its gateway (the connection was refused, or the gateway
// refused it before counting it), so that the gateway's stats will never
// count it.
func (r *Router) Undispatch(id BackendID) {
	backend, ok := r.position(id)
	if ok && r.life[backend].dispatched > 0 {
		r.life[backend].dispatched--
		r.views[backend].Pending = max(r.views[backend].Pending-1, 0)
		r.gen++ // a slot may be free
		r.touch(backend)
	}
}

// OnStats applies a gateway's stats; st.Backend is the backend's ID at this
// router. If the backend now has a free slot, the
// waiting requests are asked again, oldest first; the decided ones are
// appended to out. Under a policy.Watcher, a request whose answer cannot
// have changed (see steady) is not asked: the outcome is the same, at a
// cost that does not grow with the fleet.
func (r *Router) OnStats(now time.Duration, st *gateway.Stats, out []Outcome) []Outcome {
	b, ok := r.position(BackendID(st.Backend))
	if !ok || st.Backend < 0 {
		return out
	}
	l := &r.life[b]
	if l.refused { // it answers again (see Refused)
		l.refused = false
		r.SetEligible(l.id, true)
	}
	if st.Seq <= l.lastSeq {
		return out
	}
	r.Expire(now)
	l.lastSeq = st.Seq
	v := &r.views[b]
	if c := max(st.Capacity, 1); c != v.Capacity {
		r.gen++
	}
	if st.MaxInputTPS != v.MaxInputTPS {
		r.tpsGen++
	}
	v.Capacity, v.Active, v.Waiting, v.MaxInputTPS = max(st.Capacity, 1), st.Active, st.Waiting, st.MaxInputTPS
	var received uint64
	if r.id < len(st.Received) {
		received = st.Received[r.id]
	}
	v.Pending = int(l.dispatched - min(received, l.dispatched))
	r.heard(now, b, st.Signals) // touches b (update)
	if len(r.waiters) == 0 || !v.Free() {
		return out
	}
	return r.retry(now, false, b, out)
}

// NextTimer is the earliest waiting deadline; ok is false with no waiters.
func (r *Router) NextTimer() (at time.Duration, ok bool) {
	if len(r.waiters) == 0 {
		return 0, false
	}
	return r.waits.earliest, true
}

// OnTimer asks again every waiting request whose deadline has passed, after
// failing the backends whose heartbeat is older than the TTL.
func (r *Router) OnTimer(now time.Duration, out []Outcome) []Outcome {
	r.Expire(now)
	return r.retry(now, true, -1, out)
}

// retry asks the waiting requests again, oldest first: with dueOnly those
// whose deadline has passed, else all of them but those steady on backend
// freed's free slot (-1: none is steady).
func (r *Router) retry(now time.Duration, dueOnly bool, freed int, out []Outcome) []Outcome {
	if !dueOnly && r.allSteady(now, freed) {
		return out
	}
	r.waits.reset(len(r.views))
	kept := 0
	keep := func(i int) { // a waiter that does not move is not copied onto itself
		if kept != i {
			r.waiters[kept] = r.waiters[i]
		}
		r.waits.add(&r.waiters[kept])
		kept++
	}
	for i := range r.waiters {
		w := &r.waiters[i] // in place: a copy would escape to the heap through the policy
		if (dueOnly && w.until > now) || (!dueOnly && r.steady(now, w, freed)) {
			keep(i)
			continue
		}
		d := r.decide(now, w)
		if d.Kind == policy.Wait {
			keep(i)
			continue
		}
		out = append(out, Outcome{ID: w.id, Decision: d})
		r.recycle(w)
	}
	clear(r.waiters[kept:])
	r.waiters = r.waiters[:kept]
	return out
}

// waitSummary summarises a router's waiting requests: how many there are
// and their least deadline (NextTimer), and, while quiet, what retry needs
// to tell without reading them that a freed slot leaves every one steady:
// every waiter is watched and was decided at generation gen (and, those
// whose weights are measured, at tpsGen), none has a policy Until before
// until, and watchers[b] counts the waiters whose watch list holds
// position b. Every change to the waiters goes through reset and add:
// each pass of retry rebuilds it, Route extends it, Cancel rebuilds it.
type waitSummary struct {
	n        int
	earliest time.Duration
	quiet    bool
	hasTPS   bool
	gen      uint64
	tpsGen   uint64
	until    time.Duration
	watchers []int32
}

// reset empties the summary for a router of n positions.
func (q *waitSummary) reset(n int) {
	q.n, q.quiet, q.hasTPS = 0, true, false
	q.watchers = slices.Grow(q.watchers[:0], n)[:n]
	clear(q.watchers)
}

// add counts w, a waiter the router keeps.
func (q *waitSummary) add(w *waiter) {
	first := q.n == 0
	if first || w.until < q.earliest {
		q.earliest = w.until
	}
	q.n++
	if !q.quiet {
		return
	}
	if !w.watched || (!first && w.gen != q.gen) || (w.tps && q.hasTPS && w.tpsGen != q.tpsGen) {
		q.quiet = false
		return
	}
	if first || w.polUntil < q.until {
		q.until = w.polUntil
	}
	q.gen = w.gen
	if w.tps {
		q.hasTPS, q.tpsGen = true, w.tpsGen
	}
	for _, b := range w.watch {
		if b < 0 || b >= len(q.watchers) {
			q.quiet = false // a position the summary does not know
			return
		}
		q.watchers[b]++
	}
}

// allSteady reports, from the summary alone, that steady holds for every
// waiter after backend freed showed a free slot: each is watched, no
// generation moved since it was decided, no policy Until is within 1 ms,
// and none watches freed. It is false whenever it cannot tell.
func (r *Router) allSteady(now time.Duration, freed int) bool {
	q := &r.waits
	return q.quiet && q.n == len(r.waiters) && freed >= 0 && freed < len(q.watchers) &&
		q.gen == r.gen && (!q.hasTPS || q.tpsGen == r.tpsGen) && now+time.Millisecond <= q.until &&
		q.watchers[freed] == 0
}

// Cancel removes a waiting request; it reports whether it was waiting here.
func (r *Router) Cancel(id uint64) bool {
	for i, w := range r.waiters {
		if w.id == id {
			if w.req.QueuedAt >= 0 {
				r.views[w.req.QueuedAt].Queued--
				r.touch(w.req.QueuedAt)
			}
			r.recycle(&r.waiters[i])
			n := len(r.waiters)
			r.waiters = append(r.waiters[:i], r.waiters[i+1:]...)
			clear(r.waiters[len(r.waiters):n]) // the copy left past the end
			r.waits.reset(len(r.views))
			for j := range r.waiters {
				r.waits.add(&r.waiters[j])
			}
			return true
		}
	}
	return false
}

// steady reports whether asking waiting request w again at now, after
// backend freed showed a free slot, would certainly give the answer it got
// last time: its policy is a policy.Watcher; no backend's eligibility,
// weight, limit or models changed since, nor the membership, nor did a
// slot free up but by a stats message; the policy's Until is at least 1 ms
// away (so the deadline the router keeps would not move either); and freed
// is not a backend the wait watches. Every other backend the wait watches
// was full when it was decided and can only have freed a slot by a stats
// message, which asked it again then.
func (r *Router) steady(now time.Duration, w *waiter, freed int) bool {
	if !w.watched || freed < 0 || w.gen != r.gen || (w.tps && w.tpsGen != r.tpsGen) || now+time.Millisecond > w.polUntil {
		return false
	}
	return !slices.Contains(w.watch, freed) || !r.views[freed].Free()
}

// recycle keeps the watch list of a waiter that leaves, for the next one.
func (r *Router) recycle(w *waiter) {
	if w.watch != nil {
		r.spare = append(r.spare, w.watch[:0])
		w.watch = nil
	}
}
