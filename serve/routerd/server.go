package routerd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/internal/netsim"
	"github.com/stargate-llm/stargate/policy"
	rcore "github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/serve/wire"
)

// StaticBackend is a backend known before any gateway registers.
type StaticBackend struct {
	Name     string
	URL      string
	Capacity int
	// Models are the models it serves (none: every model), MaxModelLen
	// its context limit (0: unknown), as its /v1/models would list them.
	Models      []string
	MaxModelLen int
}

// Config describes one router replica.
type Config struct {
	// ID names this replica to gateways.
	ID     string
	Policy string
	Params policy.Params
	Seed   uint64
	// Static backends; gateways that push stats are added as they appear.
	Static []StaticBackend
	// Key checks gateways' signed stats; without it only static and
	// discovered backends exist.
	Key auth.Key
	// Discovery says a discovery source (SetDiscovered) will supply backends.
	Discovery bool
	// Keys, if set, are the router's keys by role (see auth.Keyring); else
	// Key alone serves every role.
	Keys *auth.Keyring
	// APIKeys, when set, are required of every client request, and of
	// /metrics and /v1/stargate/backends unless OpenInfo.
	APIKeys *auth.APIKeys
	// OpenInfo serves /metrics and /v1/stargate/backends without an API key
	// (scrapers on a private network); ExposeBackend names the backend that
	// answered in X-Stargate-Backend (experiments, debugging).
	OpenInfo, ExposeBackend bool
	// MaxBodyBytes bounds a request body; MaxMessages the messages in it;
	// MaxTokensLimit a request's max_tokens.
	MaxBodyBytes   int64
	MaxMessages    int
	MaxTokensLimit int
	// MaxAttempts bounds the backends one request tries before its first byte.
	MaxAttempts int
	// Liveness is the router core's lifecycle: the heartbeat TTL after
	// which a silent backend is Failed, error-rate decay, path staleness and
	// the capability filter.
	Liveness rcore.Config
	// ProbeInterval paces the RTT probes (GET /health) to every backend;
	// a static backend's answered probe also counts as its heartbeat.
	ProbeInterval time.Duration
	Logger        *slog.Logger
	// Transport carries HTTP/1.1 to backends (and https, unless its TLS
	// dialer negotiates HTTP/2); nil means a default http.Transport that
	// dials with Dial.
	Transport http.RoundTripper
	// Dial opens connections to backends, HTTP/2 ones included; nil dials TCP.
	// A router that runs a gateway in its own process reaches it in memory
	// with a memnet dialer here.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTLS opens verified TLS connections to https backends (package
	// tlsconf's Dialer, which checks the gateway's certificate); nil leaves
	// https to net/http's defaults.
	DialTLS func(ctx context.Context, network, addr string) (net.Conn, error)
	// Network, if set, wraps everything sent to backends, HTTP/2 included:
	// a live fleet's in-process network (package netsim) goes here, so that
	// its delays apply whichever way a request travels.
	Network func(http.RoundTripper) http.RoundTripper
	// Local, if set, is a gateway in the router's own process, which the
	// router calls directly (see Local). Not with Network, whose delays
	// only a network transport applies.
	Local *Local
	// HTTP2 sends requests to http:// backends that speak it (Stargate
	// gateways) over HTTP/2 without TLS (h2c), many streams on one
	// connection; others get HTTP/1.1 (see gatewayTransport).
	HTTP2 bool
	// Hooks watch the router in-process (experiments, tests).
	Hooks Hooks
	// Console serves the operator console: GET /console and its updates,
	// GET /console/events (console.go).
	Console bool
	// Pools, if set, split the backends into pools the router picks by
	// length and model before placement (pools.go).
	Pools []Pool
}

// DefaultConfig returns a router with DESIGN's policy defaults.
func DefaultConfig() Config {
	return Config{ID: "router-1", Policy: "pulsar-waw", Params: policy.DefaultParams(), Seed: 1,
		MaxBodyBytes: 8 << 20, MaxMessages: 4096, MaxTokensLimit: 1 << 20, MaxAttempts: rcore.DefaultMaxAttempts,
		Liveness:      rcore.Config{HeartbeatTTL: rcore.DefaultLiveHeartbeatTTL, PathStale: 5 * time.Second, Capability: true},
		ProbeInterval: 500 * time.Millisecond, HTTP2: true}
}

// Validate reports what is wrong with a configuration.
func (c Config) Validate(reg *policy.Registry) error {
	var errs []error
	if !wire.ValidID(c.ID) {
		errs = append(errs, fmt.Errorf("id %q must be 1-%d of letters, digits and the marks . - _ : (nothing else)", c.ID, wire.MaxIDLen))
	}
	if !reg.Has(c.Policy) {
		errs = append(errs, fmt.Errorf("unknown policy %q (known: %s)", c.Policy, strings.Join(reg.Names(), ", ")))
	}
	if err := c.Params.Validate(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, validatePools(c.Pools)...)
	seen := map[string]bool{}
	for _, b := range c.Static {
		if b.Name == "" || seen[b.Name] {
			errs = append(errs, fmt.Errorf("static backend name %q is empty or repeated", b.Name))
		}
		seen[b.Name] = true
		if !strings.HasPrefix(b.URL, "http://") && !strings.HasPrefix(b.URL, "https://") {
			errs = append(errs, fmt.Errorf("static backend %q: URL %q is not http(s)", b.Name, b.URL))
		}
		if b.Capacity < 1 {
			errs = append(errs, fmt.Errorf("static backend %q: capacity %d, want >= 1", b.Name, b.Capacity))
		}
	}
	if len(c.Static) == 0 && len(c.Key.Secret) == 0 && c.Keys == nil && !c.Discovery {
		errs = append(errs, errors.New("no static backends, no discovery and no HMAC key: gateways could never register; give --hmac-key-file, --backend or --k8s-service"))
	}
	if c.Local != nil && c.Network != nil {
		errs = append(errs, errors.New("an in-process gateway (Local) cannot be used with an in-process network (Network)"))
	}
	if c.MaxBodyBytes < 0 || c.MaxMessages < 1 || c.MaxTokensLimit < 1 || c.MaxAttempts < 1 || c.ProbeInterval <= 0 {
		errs = append(errs, errors.New("body, message, max_tokens and attempt limits and the probe interval must be positive"))
	}
	if err := c.Liveness.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("router config: %w", err)
	}
	return nil
}

// backendURL is how the router keeps a backend's URL: without a trailing
// slash, so that request paths append to it.
func backendURL(u string) string { return strings.TrimRight(u, "/") }

// backend is the router's record of one backend, kept by its ID under
// Server.mu.
type backend struct {
	id                rcore.BackendID
	name, url, region string
	static            bool
	// discovered: found by a discovery source (Kubernetes), which may
	// remove it again; also static (no stats; probes are its heartbeat).
	discovered bool
	boot       string
	last       wire.Stats
	lastSeen   time.Time
	// inflight counts this router's requests at a static backend: with no
	// gateway to send stats, the router writes its own (settleStatic).
	inflight int
}

// Server is a running router replica.
type Server struct {
	cfg    Config
	pools  poolState // pools.go
	reg    *policy.Registry
	start  time.Time
	log    *slog.Logger
	client *http.Client
	verify *auth.Verifier
	signer *auth.Signer // signs requests to gateways (router role)
	met    *metrics
	// paths holds the operator's injected path delays (SetPath).
	paths *netsim.Transport
	// h2 is the transport's HTTP/2 layer (nil without Config.HTTP2).
	h2 *gatewayTransport

	// table is the backends as one immutable snapshot, published whole
	// under mu whenever one joins, leaves or changes address or limit; a
	// request reads it without the lock.
	table atomic.Pointer[table]
	// beat is when the run loop last went round (time since start, in ns);
	// 0 while it is not running. /health fails when it is older than
	// stuckAfter.
	beat       atomic.Int64
	stuckAfter time.Duration

	mu       sync.Mutex
	backends map[rcore.BackendID]*backend
	// core is built with the first backend and never again: backends join
	// and leave it by ID (Add, Remove), keeping every other one's state.
	core     *rcore.Router
	waits    map[uint64]*waitEntry
	nextID   uint64
	created  map[string]int64 // when each model was first listed (modelCreated)
	counts   accounting
	outBuf   []rcore.Outcome
	timerSet chan struct{}
	// con is the operator console's state (console.go).
	con *console
}

type waitEntry struct {
	ch chan rcore.Decision // capacity 1
}

// New builds a router replica.
func New(cfg Config, reg *policy.Registry) (*Server, error) {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if err := cfg.Validate(reg); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tr := cfg.Transport
	if tr == nil {
		tr = newBackendTransport(cfg.Dial, cfg.DialTLS)
	}
	var h2 *gatewayTransport
	if cfg.HTTP2 {
		h2 = newGatewayTransport(tr, cfg.Dial)
		tr = h2
	}
	if cfg.Network != nil {
		tr = cfg.Network(tr)
	}
	paths := netsim.New(tr, cfg.Seed)
	s := &Server{h2: h2, cfg: cfg, reg: reg, start: time.Now(), log: cfg.Logger.With("router", cfg.ID), client: &http.Client{Transport: paths},
		paths: paths, waits: make(map[uint64]*waitEntry), timerSet: make(chan struct{}, 1),
		backends: make(map[rcore.BackendID]*backend), stuckAfter: DefaultStuckAfter, con: newConsole()}
	s.initAuth()
	s.table.Store(&table{byID: map[rcore.BackendID]target{}})
	var static []*backend
	for _, b := range cfg.Static {
		static = append(static, &backend{name: b.Name, url: backendURL(b.URL), static: true,
			last: wire.Stats{Backend: b.Name, Capacity: b.Capacity, Models: b.Models, MaxModelLen: b.MaxModelLen}, lastSeen: time.Now()})
	}
	if len(static) > 0 {
		if err := s.build(static); err != nil {
			return nil, err
		}
	}
	s.met = newMetrics(s)
	return s, nil
}

func (s *Server) now() time.Duration { return time.Since(s.start) }

// Run keeps the router's timers (waiting requests' deadlines, heartbeat
// TTLs) and probes every backend. It returns when ctx ends.
func (s *Server) Run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	live := time.NewTicker(100 * time.Millisecond)
	defer live.Stop()
	probe := time.NewTicker(s.cfg.ProbeInterval)
	defer probe.Stop()
	var probes sync.WaitGroup
	defer probes.Wait()
	defer s.beat.Store(0)
	if s.cfg.Console {
		probes.Go(func() { s.consoleLoop(ctx) })
	}
	for {
		s.beat.Store(max(int64(s.now()), 1))
		timer.Reset(s.nextWait())
		select {
		case <-ctx.Done():
			return
		case <-s.timerSet:
		case <-live.C:
			s.expire()
		case <-probe.C:
			s.probeAll(ctx, &probes)
		case <-timer.C:
			s.fire()
		}
	}
}

// DefaultStuckAfter is how long the run loop may go without a round (it
// goes round at least every 100 ms) before /health reports the router
// stuck.
const DefaultStuckAfter = 5 * time.Second

// stuck reports whether the run loop is running but has not gone round for
// longer than stuckAfter, and for how long.
func (s *Server) stuck() (time.Duration, bool) {
	beat := s.beat.Load()
	if beat == 0 {
		return 0, false
	}
	late := s.now() - time.Duration(beat)
	return late, late > s.stuckAfter
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if late, stuck := s.stuck(); stuck {
		http.Error(w, fmt.Sprintf("router stuck: its run loop last went round %v ago", late.Round(time.Millisecond)), http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n"))
}

// nextWait is how long the run loop may sleep before the core's next timer.
func (s *Server) nextWait() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.core != nil {
		if at, ok := s.core.NextTimer(); ok {
			return max(at-s.now(), 0)
		}
	}
	return time.Hour
}

// expire fails the backends whose heartbeat TTL ran out.
func (s *Server) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.core != nil {
		s.core.Expire(s.now())
		if s.cfg.Console {
			s.watchLocked(s.now())
		}
	}
}

// fire asks again the waiting requests whose deadline passed.
func (s *Server) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.core != nil {
		s.outBuf = s.core.OnTimer(s.now(), s.outBuf[:0])
		s.deliver(s.outBuf)
	}
}

// HTTP2Conns counts the router's HTTP/2 connections to gateways open now.
func (s *Server) HTTP2Conns() int {
	if s.h2 == nil {
		return 0
	}
	return s.h2.Conns()
}

// Close closes the router's idle connections to backends: call it once
// the HTTP server has shut down.
func (s *Server) Close() {
	if c, ok := s.client.Transport.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	if s.h2 != nil {
		s.h2.CloseIdleConnections()
	}
}

// probeAll measures the round trip to every backend's /health, in parallel.
func (s *Server) probeAll(ctx context.Context, wg *sync.WaitGroup) {
	for _, t := range s.table.Load().list {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, s.cfg.ProbeInterval)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.url+"/health", nil)
			if err != nil {
				return
			}
			start := time.Now()
			resp, err := s.client.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1024))
			resp.Body.Close()
			rtt := time.Since(start)
			if resp.StatusCode != http.StatusOK {
				return
			}
			s.probed(t.id, rtt)
		}()
	}
}

// probed applies an answered probe: the path estimate, and for a static
// backend a heartbeat.
func (s *Server) probed(id rcore.BackendID, rtt time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.backends[id]
	if !ok { // gone since the probe started
		return
	}
	now := s.now()
	s.core.OnProbe(now, id, rtt)
	if b.static {
		b.lastSeen = time.Now()
		b.last.Seq++
		s.outBuf = s.core.OnStats(now, s.coreStats(id, &b.last), s.outBuf[:0])
		s.deliver(s.outBuf)
	}
}

// placement is b as the placement core takes it, from its last stats.
func (b *backend) placement() rcore.Backend {
	return rcore.Backend{Name: b.name, Capacity: max(b.last.Capacity, 1), MaxModelLen: b.last.MaxModelLen, Models: b.last.Models,
		CacheTokens: b.last.CacheTokens}
}

// add makes b a backend: the first one builds the placement core, later
// ones join it by ID, leaving every other backend's state alone. Waiting
// requests are asked again. Called with mu held.
func (s *Server) add(b *backend) error {
	if s.core == nil {
		return s.build([]*backend{b})
	}
	id, out, err := s.core.Add(s.now(), b.placement(), s.outBuf[:0])
	if err != nil {
		return fmt.Errorf("router %s: %w", s.cfg.ID, err)
	}
	b.id, s.backends[id] = id, b
	s.publish() // before any waiting request hears of the new backend
	s.outBuf = out
	s.deliver(s.outBuf)
	signal(s.timerSet)
	return nil
}

// build makes the placement core over the first backends, which get IDs 0,
// 1, ... in order. Called with mu held, or before the server runs.
func (s *Server) build(bs []*backend) error {
	pb := make([]policy.Backend, len(bs))
	rb := make([]rcore.Backend, len(bs))
	for i, b := range bs {
		pb[i] = policy.Backend{Name: b.name, Key: policy.KeyOf(b.name)}
		rb[i] = b.placement()
	}
	pol, err := s.reg.New(s.cfg.Policy, s.cfg.Params, pb, rand.New(rand.NewPCG(s.cfg.Seed, uint64(len(pb)))))
	if err != nil {
		return fmt.Errorf("router %s: %w", s.cfg.ID, err)
	}
	c, err := rcore.NewWith(0, pol, rb, s.cfg.Liveness)
	if err != nil {
		return fmt.Errorf("router %s: %w", s.cfg.ID, err)
	}
	c.SetPools(poolOf(s.cfg.Pools))
	// The core's clock starts at 0: each backend was heard from now.
	now := s.now()
	for i, b := range bs {
		b.id = rcore.BackendID(i)
		st := s.coreStats(b.id, &b.last)
		st.Seq = 1
		s.outBuf = c.OnStats(now, st, s.outBuf[:0])
		s.backends[b.id] = b
	}
	s.core = c
	s.publish()
	signal(s.timerSet)
	return nil
}

// remove forgets backend id; requests waiting for it are asked again.
// Called with mu held.
func (s *Server) remove(id rcore.BackendID) {
	out, err := s.core.Remove(s.now(), id, s.outBuf[:0])
	if err != nil {
		s.log.Error("removing a backend the core does not know", "id", id, "err", err)
	}
	if b, ok := s.backends[id]; ok {
		s.met.lat.forget(b.name)
	}
	delete(s.backends, id)
	s.publish()
	s.outBuf = out
	s.deliver(s.outBuf)
	signal(s.timerSet)
}

// publish stores a new snapshot of the backends, in the core's order.
// Called with mu held.
func (s *Server) publish() {
	t := &table{byID: make(map[rcore.BackendID]target, len(s.backends))}
	if s.core != nil {
		for i := range s.core.Views() {
			b := s.backends[s.core.ID(i)]
			tg := target{id: b.id, name: b.name, url: b.url, static: b.static, maxModelLen: b.last.MaxModelLen, models: b.last.Models}
			t.list = append(t.list, tg)
			t.byID[b.id] = tg
		}
	}
	s.table.Store(t)
}

func (s *Server) coreStats(id rcore.BackendID, m *wire.Stats) *core.Stats {
	return &core.Stats{Backend: int(id), Seq: m.Seq, Capacity: max(m.Capacity, 1), Active: m.Active, Waiting: m.Waiting,
		InputTPS: m.InputTPS, MaxInputTPS: m.MaxInputTPS, Received: []uint64{m.Received}, Signals: m.Signals}
}

// deliver hands decisions about waiting requests to their handlers. Called
// with mu held.
func (s *Server) deliver(out []rcore.Outcome) {
	for _, o := range out {
		if w, ok := s.waits[o.ID]; ok {
			w.ch <- o.Decision
			delete(s.waits, o.ID)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Handler serves the OpenAI API, the stats endpoint, /health, /metrics and
// /v1/stargate/backends.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	mux.HandleFunc("POST /v1/completions", s.complete)
	mux.HandleFunc(passthroughPattern, s.passthrough)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /health", s.health)
	mux.Handle("GET /metrics", s.guardInfo(s.met.handler()))
	mux.Handle("GET /v1/stargate/backends", s.guardInfo(http.HandlerFunc(s.listBackends)))
	mux.HandleFunc("POST "+wire.PathStats, s.stats)
	mux.HandleFunc("POST /admin/backends/{name}/drain", func(w http.ResponseWriter, r *http.Request) { s.drain(w, r, true) })
	mux.HandleFunc("POST /admin/backends/{name}/undrain", func(w http.ResponseWriter, r *http.Request) { s.drain(w, r, false) })
	mux.HandleFunc("POST /admin/backends/{name}/path", s.adminPath)
	if s.cfg.Console {
		mux.Handle("GET /console", s.guardInfo(http.HandlerFunc(s.serveConsole)))
		mux.Handle("GET /console/events", s.guardInfo(http.HandlerFunc(s.consoleEvents)))
	}
	return s.hideBackend(apiErrors(mux))
}

// stats takes a gateway's signed stats: it registers the backend on first
// sight and on a new boot, and feeds the placement core.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	if s.verify == nil {
		http.Error(w, "this router takes no registrations: it has no HMAC key (--hmac-key-file)", http.StatusNotFound)
		return
	}
	// Signed for this replica only, which the answer names, so that a
	// gateway reaching it through a shared address can sign for it.
	w.Header().Set(wire.HeaderRouter, s.cfg.ID)
	body, msgID, err := s.verify.Verify(r, 1<<20, auth.RoleGateway)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	var m wire.Stats
	if err := json.Unmarshal(body, &m); err != nil {
		http.Error(w, "stats body is not JSON stats: "+err.Error(), http.StatusBadRequest)
		return
	}
	if err := checkStats(&m, msgID.Sender); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m.CacheTokens = wire.ClampCacheTokens(m.CacheTokens) // a lie sizes no index past the bound
	if status, err := s.register(&m, msgID.Boot); err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	writeJSON(w, http.StatusOK, wire.StatsReply{Router: s.cfg.ID})
}

// register applies a gateway's verified stats: the backend joins on first
// sight; a new boot means its counts start again; a new address or limit
// is published. On error, status is the HTTP status that says so.
func (s *Server) register(m *wire.Stats, boot string) (status int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b *backend
	if s.core != nil {
		if id, ok := s.core.Lookup(m.Backend); ok {
			b = s.backends[id]
		}
	}
	if b != nil && b.static {
		return http.StatusConflict, fmt.Errorf("backend %q is configured statically here; give the gateway another --id", m.Backend)
	}
	now := s.now()
	if b == nil && len(s.backends) >= MaxBackends {
		return http.StatusInsufficientStorage, fmt.Errorf("this router already has %d backends, its limit", MaxBackends)
	}
	s.noteStats(b, m, b == nil, b != nil && b.boot != "" && b.boot != boot)
	if b == nil {
		b = &backend{name: m.Backend, url: backendURL(m.URL), region: m.Region, boot: boot, last: *m, lastSeen: time.Now()}
		if err := s.add(b); err != nil {
			return http.StatusInternalServerError, err
		}
		s.log.Info("backend registered", "backend", m.Backend, "url", m.URL, "capacity", m.Capacity)
	}
	if b.boot != boot {
		// A restarted gateway counts from zero again.
		_ = s.core.Restarted(b.id)
		b.boot = boot
	}
	republish := b.url != backendURL(m.URL) || b.last.MaxModelLen != m.MaxModelLen || !slices.Equal(b.last.Models, m.Models)
	if !slices.Equal(b.last.Models, m.Models) {
		_ = s.core.SetModels(now, b.id, m.Models)
	}
	if b.last.MaxModelLen != m.MaxModelLen {
		_ = s.core.Advertise(now, b.id, m.MaxModelLen)
	}
	if b.last.CacheTokens != m.CacheTokens {
		_ = s.core.SetCacheTokens(b.id, m.CacheTokens) // b is live; clamped on arrival: never negative
	}
	b.url, b.region, b.last, b.lastSeen = backendURL(m.URL), m.Region, *m, time.Now()
	if republish {
		s.publish()
	}
	if h := s.cfg.Hooks.Report; h != nil {
		h(ReportEvent{At: b.lastSeen, Router: s.cfg.ID, Backend: m.Backend, Signals: m.Signals != nil, Hardware: m.Signals != nil && m.Signals.Hardware})
	}
	s.outBuf = s.core.OnStats(now, s.coreStats(b.id, m), s.outBuf[:0])
	s.deliver(s.outBuf)
	return http.StatusOK, nil
}

// verifyAdmin checks an operator's signed admin call and returns its body;
// false once it has answered the call with the reason it was refused.
func (s *Server) verifyAdmin(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if s.verify == nil {
		http.Error(w, "this router has no HMAC key; start it with --hmac-key-file to use the admin API", http.StatusNotFound)
		return nil, false
	}
	body, msg, err := s.verify.Verify(r, 1<<10, auth.RoleOperator)
	auth.Audit(s.log, r, msg, err)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return nil, false
	}
	return body, true
}

func (s *Server) drain(w http.ResponseWriter, r *http.Request, on bool) {
	if _, ok := s.verifyAdmin(w, r); !ok {
		return
	}
	name := r.PathValue("name")
	if err := s.setDrain(name, on); err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	s.log.Info("operator drain", "backend", name, "drain", on)
	if on {
		s.con.events.add(name, EventDrain, "drained by an operator")
	} else {
		s.con.events.add(name, EventUndrain, "undrained by an operator")
	}
	writeJSON(w, http.StatusOK, map[string]any{"backend": name, "draining": on})
}

// setDrain drains backend name, or returns it to service.
func (s *Server) setDrain(name string, on bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := rcore.NoBackend, false
	if s.core != nil {
		id, ok = s.core.Lookup(name)
	}
	switch {
	case !ok:
		return fmt.Errorf("no backend %q", name)
	case on:
		return s.core.Drain(s.now(), id)
	default:
		return s.core.Undrain(s.now(), id)
	}
}

// Discovered is a backend a discovery source (Kubernetes EndpointSlices)
// reports: a gateway's URL, ready or not.
type Discovered struct {
	Name  string
	URL   string
	Ready bool
}

// SetDiscovered replaces the backends found by discovery: new ones join
// (with DiscoveredCapacity until they say otherwise), missing ones leave, and
// one that is not ready is drained rather than forgotten, so it finishes what
// it holds. Registered and static backends are left alone.
func (s *Server) SetDiscovered(list []Discovered) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := make(map[string]Discovered, len(list))
	for _, d := range list {
		if !strings.HasPrefix(d.URL, "http://") && !strings.HasPrefix(d.URL, "https://") {
			return fmt.Errorf("router: discovered backend %q: URL %q is not http(s)", d.Name, d.URL)
		}
		want[d.Name] = d
	}
	// Leaving first (in the core's order, so that the outcome does not
	// depend on map order), then joining.
	var gone []rcore.BackendID
	have := map[string]bool{}
	for _, t := range s.table.Load().list {
		b := s.backends[t.id]
		if d, ok := want[b.name]; b.discovered && (!ok || backendURL(d.URL) != b.url) {
			gone = append(gone, b.id)
			continue
		}
		have[b.name] = true
	}
	for _, id := range gone {
		s.remove(id)
	}
	for _, d := range list {
		if !have[d.Name] {
			have[d.Name] = true
			if err := s.add(&backend{name: d.Name, url: backendURL(d.URL), static: true, discovered: true,
				last: wire.Stats{Backend: d.Name, Capacity: DiscoveredCapacity}, lastSeen: time.Now()}); err != nil {
				return err
			}
		}
	}
	if s.core == nil {
		return nil
	}
	now := s.now()
	for _, d := range list {
		if i, ok := s.core.Lookup(d.Name); ok {
			if d.Ready {
				_ = s.core.Undrain(now, i)
			} else {
				_ = s.core.Drain(now, i)
			}
		}
	}
	return nil
}

// DiscoveredCapacity is a discovered backend's capacity before it reports
// its own: the gateway default of 25 requests for one worker.
const DiscoveredCapacity = 25

// MaxBackends bounds the backends one router keeps; registrations beyond
// it are refused.
const MaxBackends = 4096

// Bounds of a stats message's strings, which a router keeps.
const (
	maxStatsURL, maxStatsRegion, maxStatsModels, maxStatsModel = 2048, 64, 64, 256
)

// boundStats checks that what a router keeps of a stats message is bounded.
func boundStats(m *wire.Stats) error {
	if !wire.ValidID(m.Backend) {
		return fmt.Errorf("stats backend id %.64q must be 1-%d of letters, digits and the marks . - _ : (nothing else)", m.Backend, wire.MaxIDLen)
	}
	if len(m.URL) > maxStatsURL || len(m.Region) > maxStatsRegion || len(m.Models) > maxStatsModels {
		return fmt.Errorf("stats of %q: URL, region or model list too long (limits %d, %d bytes, %d models)", m.Backend, maxStatsURL, maxStatsRegion, maxStatsModels)
	}
	if len(m.OwnedBy) > maxStatsModel {
		return fmt.Errorf("stats of %q: owned_by is over %d bytes", m.Backend, maxStatsModel)
	}
	for _, name := range m.Models {
		if len(name) > maxStatsModel {
			return fmt.Errorf("stats of %q: a model name is over %d bytes", m.Backend, maxStatsModel)
		}
	}
	return nil
}

func checkStats(m *wire.Stats, sender string) error {
	if m.Backend == "" || m.Backend != sender {
		return fmt.Errorf("stats for backend %q signed by %q: a gateway reports only itself", m.Backend, sender)
	}
	if err := boundStats(m); err != nil {
		return err
	}
	if !strings.HasPrefix(m.URL, "http://") && !strings.HasPrefix(m.URL, "https://") {
		return fmt.Errorf("stats URL %q is not http(s)", m.URL)
	}
	if m.Capacity < 1 || m.Active < 0 || m.Waiting < 0 || m.InputTPS < 0 || m.MaxInputTPS < 0 || m.Seq == 0 || m.MaxModelLen < 0 {
		return fmt.Errorf("stats of %q are out of range (capacity %d, active %d, waiting %d, seq %d)", m.Backend, m.Capacity, m.Active, m.Waiting, m.Seq)
	}
	return nil
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	seen, owner := map[string]int{}, map[string]string{}
	var order []string
	for _, b := range s.Backends() {
		if b.State != "ready" {
			continue
		}
		for _, m := range b.Stats.Models {
			if _, ok := seen[m]; !ok {
				order = append(order, m)
				owner[m] = cmp.Or(b.Stats.OwnedBy, "stargate")
			}
			seen[m] = max(seen[m], b.Stats.MaxModelLen)
		}
	}
	data := make([]map[string]any, len(order))
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, m := range order {
		data[i] = map[string]any{"id": m, "object": "model", "created": s.modelCreated(m, now), "owned_by": owner[m], "max_model_len": seen[m]}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// BackendInfo is one entry of GET /v1/stargate/backends.
type BackendInfo struct {
	Name   string `json:"name"`
	URL    string `json:"url"`
	Region string `json:"region,omitempty"`
	// State is the lifecycle state: loading, ready, draining, terminated or
	// failed.
	State  string `json:"state"`
	Static bool   `json:"static,omitempty"`
	// Weight is the policy's current weight (equal weights for policies
	// without their own); Fallback says its score ran without hardware
	// signals.
	Weight   int                  `json:"weight"`
	Fallback bool                 `json:"telemetry_fallback"`
	Policy   policy.BackendWeight `json:"policy_weight"`
	Pending  int                  `json:"pending"`
	Queued   int                  `json:"queued"`
	AgeS     float64              `json:"last_stats_age_s"`
	Eligible bool                 `json:"eligible"`
	Refused  bool                 `json:"connection_refused,omitempty"`
	Status   rcore.BackendStatus  `json:"status"`
	Stats    wire.Stats           `json:"stats"`
}

// Backends lists the router's backends as GET /v1/stargate/backends does.
func (s *Server) Backends() []BackendInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.core == nil {
		return []BackendInfo{}
	}
	now := s.now()
	// Backends first: it brings the views to now (expiry, error rates and
	// overload shares decayed), so the weights exported are the ones a
	// pick at now would place by, not those of the last pick.
	status := s.core.Backends(now)
	views := s.core.Views()
	start := time.Now()
	weights := policy.WeightsOf(s.core.Policy(), views)
	s.projected(time.Since(start))
	out := make([]BackendInfo, len(status))
	for i := range status {
		b := s.backends[status[i].ID]
		out[i] = BackendInfo{Name: b.name, URL: b.url, Region: b.region, State: status[i].StateName, Static: b.static,
			Weight: weights[i].Weight, Fallback: weights[i].Fallback || (b.last.Signals != nil && !b.last.Signals.Hardware),
			Policy: weights[i], Pending: views[i].Pending, Queued: views[i].Queued, AgeS: time.Since(b.lastSeen).Seconds(),
			Eligible: views[i].Eligible, Refused: status[i].Refused, Status: status[i], Stats: b.last}
	}
	return out
}

// States returns each backend's lifecycle state (as Backends names it),
// by backend name. Unlike Backends it computes no weights, so polling it
// leaves a weighting policy's hysteresis alone.
func (s *Server) States() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.backends))
	if s.core == nil {
		return out
	}
	for _, st := range s.core.Backends(s.now()) {
		out[st.Name] = st.StateName
	}
	return out
}

// LastWeights returns the policy's weights as its last pick left them, for
// a policy whose weights move (policy.WeightKeeper); nil otherwise. Unlike
// Backends, it recomputes nothing, so watching it changes no placement.
func (s *Server) LastWeights() []policy.BackendWeight {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.core == nil {
		return nil
	}
	if wk, ok := s.core.Policy().(policy.WeightKeeper); ok {
		return wk.LastWeights(nil)
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) { openai.WriteJSON(w, status, v) }
