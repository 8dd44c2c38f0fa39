package router

import (
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
	"time"

	core "github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	rcore "github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/link"
	"github.com/stargate-llm/stargate/serve/netsim"
	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/serve/wire"
)

// StaticBackend is a backend known before any gateway registers.
type StaticBackend struct {
	Name     string
	URL      string
	Capacity int
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
	// Transport carries plain HTTP to backends (and is the fallback of the
	// links); nil means a default http.Transport that dials with Dial.
	Transport http.RoundTripper
	// Dial opens connections to backends, links included; nil dials TCP.
	// A router that runs a gateway in its own process reaches it in memory
	// with a memnet dialer here.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Network, if set, wraps everything sent to backends, links included:
	// a live fleet's in-process network (package netsim) goes here, so that
	// its delays apply whichever way a request travels.
	Network func(http.RoundTripper) http.RoundTripper
	// Local, if set, is a gateway in the router's own process, which the
	// router calls directly (see Local). Not with Network, whose delays
	// only a network transport applies.
	Local *Local
	// Link sends requests to gateways over one multiplexed connection each
	// (package link) where the gateway accepts one; others get plain HTTP.
	Link bool
	// Hooks watch the router in-process (experiments, tests).
	Hooks Hooks
}

// DefaultConfig returns a router with DESIGN's policy defaults.
func DefaultConfig() Config {
	return Config{ID: "router-1", Policy: "pulsar-waw", Params: policy.DefaultParams(), Seed: 1,
		MaxBodyBytes: 8 << 20, MaxMessages: 4096, MaxTokensLimit: 1 << 20, MaxAttempts: rcore.DefaultMaxAttempts,
		Liveness:      rcore.Config{HeartbeatTTL: 1500 * time.Millisecond, PathStale: 5 * time.Second, Capability: true},
		ProbeInterval: 500 * time.Millisecond, Link: true}
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

// backend is the router's record of one backend.
type backend struct {
	name, url, region string
	static            bool
	// discovered: found by a discovery source (Kubernetes), which may
	// remove it again; also static (no stats; probes are its heartbeat).
	discovered bool
	boot       string
	last       wire.Stats
	lastSeen   time.Time
	// refused: a connection to it was refused; it takes nothing until its
	// next stats message.
	refused bool
	// inflight counts this router's requests at a static backend: with no
	// gateway to send stats, the router writes its own (settleStatic).
	inflight int
}

// Server is a running router replica.
type Server struct {
	cfg    Config
	reg    *policy.Registry
	start  time.Time
	log    *slog.Logger
	client *http.Client
	verify *auth.Verifier
	signer *auth.Signer // signs requests to gateways (router role)
	met    *metrics
	// paths holds the operator's injected path delays (SetPath).
	paths *netsim.Transport
	// links is the transport's link layer (nil without Config.Link).
	links *link.Transport

	mu       sync.Mutex
	backends []*backend
	core     *rcore.Router
	waits    map[uint64]*waitEntry
	nextID   uint64
	counts   accounting
	outBuf   []rcore.Outcome
	timerSet chan struct{}
}

type waitEntry struct {
	session uint64
	tokens  int
	exclude []int
	ch      chan policy.Decision // capacity 1
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
		tr = &http.Transport{DialContext: cfg.Dial, MaxIdleConns: 2048, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second, DisableCompression: true}
	}
	var links *link.Transport
	if cfg.Link {
		links = link.NewTransport(tr)
		links.Dial = cfg.Dial
		tr = links
	}
	if cfg.Network != nil {
		tr = cfg.Network(tr)
	}
	paths := netsim.New(tr, cfg.Seed)
	s := &Server{links: links, cfg: cfg, reg: reg, start: time.Now(), log: cfg.Logger.With("router", cfg.ID), client: &http.Client{Transport: paths},
		paths: paths, waits: make(map[uint64]*waitEntry), timerSet: make(chan struct{}, 1)}
	s.initAuth()
	for _, b := range cfg.Static {
		s.backends = append(s.backends, &backend{name: b.Name, url: backendURL(b.URL), static: true,
			last: wire.Stats{Backend: b.Name, Capacity: b.Capacity}, lastSeen: time.Now()})
	}
	if len(s.backends) > 0 {
		if err := s.rebuild(); err != nil {
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
	for {
		s.mu.Lock()
		wait := time.Hour
		if s.core != nil {
			if at, ok := s.core.NextTimer(); ok {
				wait = max(at-s.now(), 0)
			}
		}
		s.mu.Unlock()
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.timerSet:
		case <-live.C:
			s.mu.Lock()
			if s.core != nil {
				s.core.Expire(s.now())
			}
			s.mu.Unlock()
		case <-probe.C:
			s.probeAll(ctx, &probes)
		case <-timer.C:
			s.mu.Lock()
			if s.core != nil {
				s.outBuf = s.core.OnTimer(s.now(), s.outBuf[:0])
				s.deliver(s.outBuf)
			}
			s.mu.Unlock()
		}
	}
}

// Links counts the gateways this router reaches over a link.
func (s *Server) Links() int {
	if s.links == nil {
		return 0
	}
	return s.links.Links()
}

// Close closes the router's links to gateways, whose streams in flight
// fail: call it once the HTTP server has shut down.
func (s *Server) Close() {
	if s.links != nil {
		s.links.Close()
	}
}

// probeAll measures the round trip to every backend's /health, in parallel.
func (s *Server) probeAll(ctx context.Context, wg *sync.WaitGroup) {
	s.mu.Lock()
	type target struct{ name, url string }
	targets := make([]target, len(s.backends))
	for i, b := range s.backends {
		targets[i] = target{b.name, b.url}
	}
	s.mu.Unlock()
	for _, t := range targets {
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
			s.probed(t.name, rtt)
		}()
	}
}

// probed applies an answered probe: the path estimate, and for a static
// backend a heartbeat.
func (s *Server) probed(name string, rtt time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.core == nil {
		return
	}
	i, ok := s.core.Lookup(name)
	if !ok {
		return
	}
	now := s.now()
	s.core.OnProbe(now, i, rtt)
	if b := s.backends[i]; b.static {
		b.lastSeen = time.Now()
		b.last.Seq++
		s.outBuf = s.core.OnStats(now, s.coreStats(i, &b.last), s.outBuf[:0])
		s.deliver(s.outBuf)
	}
}

// rebuild makes a new placement core over the current backends, as when one
// joins or restarts, and asks again for every waiting request. Called with
// mu held.
func (s *Server) rebuild() error {
	pb := make([]policy.Backend, len(s.backends))
	rb := make([]rcore.Backend, len(s.backends))
	for i, b := range s.backends {
		pb[i] = policy.Backend{Name: b.name, Key: policy.KeyOf(b.name)}
		rb[i] = rcore.Backend{Name: b.name, Capacity: max(b.last.Capacity, 1), MaxModelLen: b.last.MaxModelLen}
	}
	pol, err := s.reg.New(s.cfg.Policy, s.cfg.Params, pb, rand.New(rand.NewPCG(s.cfg.Seed, uint64(len(pb)))))
	if err != nil {
		return fmt.Errorf("router %s: %w", s.cfg.ID, err)
	}
	c, err := rcore.NewWith(0, pol, rb, s.cfg.Liveness)
	if err != nil {
		return fmt.Errorf("router %s: %w", s.cfg.ID, err)
	}
	now := s.now()
	for i, b := range s.backends {
		c.SetEligible(i, !b.refused)
		// Replay what each backend said last; one silent for longer than the
		// TTL is left to expire.
		if time.Since(b.lastSeen) <= s.cfg.Liveness.HeartbeatTTL || s.cfg.Liveness.HeartbeatTTL == 0 {
			st := s.coreStats(i, &b.last)
			st.Seq = 1
			s.outBuf = c.OnStats(now, st, s.outBuf[:0])
		}
	}
	s.core = c
	ids := make([]uint64, 0, len(s.waits))
	for id := range s.waits {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		w := s.waits[id]
		if d := c.RouteWith(now, id, w.session, w.tokens, w.exclude); d.Kind != policy.Wait {
			w.ch <- d
			delete(s.waits, id)
		}
	}
	signal(s.timerSet)
	return nil
}

func (s *Server) coreStats(i int, m *wire.Stats) *core.Stats {
	return &core.Stats{Backend: i, Seq: m.Seq, Capacity: max(m.Capacity, 1), Active: m.Active, Waiting: m.Waiting,
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
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.Handle("GET /metrics", s.guardInfo(s.met.handler()))
	mux.Handle("GET /v1/stargate/backends", s.guardInfo(http.HandlerFunc(s.listBackends)))
	mux.HandleFunc("POST "+wire.PathStats, s.stats)
	mux.HandleFunc("POST /admin/backends/{name}/drain", func(w http.ResponseWriter, r *http.Request) { s.drain(w, r, true) })
	mux.HandleFunc("POST /admin/backends/{name}/undrain", func(w http.ResponseWriter, r *http.Request) { s.drain(w, r, false) })
	mux.HandleFunc("POST /admin/backends/{name}/path", s.adminPath)
	return s.hideBackend(mux)
}

// stats takes a gateway's signed stats: it registers the backend on first
// sight and on a new boot, and feeds the placement core.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	if s.verify == nil {
		http.Error(w, "this router takes no registrations: it has no HMAC key (--hmac-key-file)", http.StatusNotFound)
		return
	}
	body, msgID, err := s.verify.VerifyService(r, 1<<20, auth.RoleGateway)
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
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.backends, func(b *backend) bool { return b.name == m.Backend })
	if i >= 0 && s.backends[i].static {
		http.Error(w, fmt.Sprintf("backend %q is configured statically here; give the gateway another --id", m.Backend), http.StatusConflict)
		return
	}
	rebuild := false
	if i < 0 && len(s.backends) >= MaxBackends {
		http.Error(w, fmt.Sprintf("this router already has %d backends, its limit", MaxBackends), http.StatusInsufficientStorage)
		return
	}
	if i < 0 {
		s.backends = append(s.backends, &backend{name: m.Backend})
		i = len(s.backends) - 1
		rebuild = true
		s.log.Info("backend registered", "backend", m.Backend, "url", m.URL, "capacity", m.Capacity)
	}
	b := s.backends[i]
	if b.boot != msgID.Boot {
		rebuild = rebuild || b.boot != "" // a restarted gateway counts from zero again
		b.boot = msgID.Boot
	}
	if b.last.Capacity != m.Capacity || b.last.MaxModelLen != m.MaxModelLen {
		rebuild = true
	}
	b.url, b.region, b.last, b.lastSeen = backendURL(m.URL), m.Region, m, time.Now()
	if h := s.cfg.Hooks.Report; h != nil {
		h(ReportEvent{At: b.lastSeen, Router: s.cfg.ID, Backend: m.Backend, Signals: m.Signals != nil, Hardware: m.Signals != nil && m.Signals.Hardware})
	}
	if b.refused && !rebuild {
		b.refused = false
		s.core.SetEligible(i, true)
	}
	b.refused = false
	if rebuild {
		if err := s.rebuild(); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
	} else {
		s.outBuf = s.core.OnStats(s.now(), s.coreStats(i, &m), s.outBuf[:0])
		s.deliver(s.outBuf)
	}
	writeJSON(w, http.StatusOK, wire.StatsReply{Router: s.cfg.ID})
}

// drain stops (or resumes) new requests to a backend on an operator's
// signed request; a draining backend finishes what it holds.
// verifyAdmin checks an operator's signed admin call and returns its body;
// false once it has answered the call with the reason it was refused.
func (s *Server) verifyAdmin(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if s.verify == nil {
		http.Error(w, "this router has no HMAC key; start it with --hmac-key-file to use the admin API", http.StatusNotFound)
		return nil, false
	}
	body, msg, err := s.verify.Verify(r, 1<<10, auth.RoleOperator)
	s.auditAdmin(r, msg, err)
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
	s.mu.Lock()
	var err error
	i, ok := -1, false
	if s.core != nil {
		i, ok = s.core.Lookup(name)
	}
	switch {
	case !ok:
		err = fmt.Errorf("no backend %q", name)
	case on:
		err = s.core.Drain(s.now(), i)
	default:
		err = s.core.Undrain(s.now(), i)
	}
	s.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	s.log.Info("operator drain", "backend", name, "drain", on)
	writeJSON(w, http.StatusOK, map[string]any{"backend": name, "draining": on})
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
	changed := false
	kept := s.backends[:0:0]
	for _, b := range s.backends {
		if d, ok := want[b.name]; b.discovered && (!ok || d.URL != b.url) {
			changed = true
			continue
		}
		kept = append(kept, b)
	}
	have := map[string]bool{}
	for _, b := range kept {
		have[b.name] = true
	}
	for _, d := range list {
		if !have[d.Name] {
			kept = append(kept, &backend{name: d.Name, url: backendURL(d.URL), static: true, discovered: true,
				last: wire.Stats{Backend: d.Name, Capacity: DiscoveredCapacity}, lastSeen: time.Now()})
			changed = true
		}
	}
	s.backends = kept
	if changed {
		if len(s.backends) == 0 {
			s.core = nil
		} else if err := s.rebuild(); err != nil {
			return err
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
	states := s.Backends()
	s.mu.Lock()
	seen := map[string]int{}
	var order []string
	for i, b := range s.backends {
		if i < len(states) && states[i].State != "ready" {
			continue
		}
		for _, m := range b.last.Models {
			if _, ok := seen[m]; !ok {
				order = append(order, m)
			}
			seen[m] = max(seen[m], b.last.MaxModelLen)
		}
	}
	s.mu.Unlock()
	data := make([]map[string]any, len(order))
	for i, m := range order {
		data[i] = map[string]any{"id": m, "object": "model", "owned_by": "stargate", "max_model_len": seen[m]}
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
	out := make([]BackendInfo, len(s.backends))
	if s.core == nil {
		return out
	}
	now := s.now()
	views := s.core.Views()
	weights := policy.WeightsOf(s.core.Policy(), views)
	status := s.core.Backends(now)
	for i, b := range s.backends {
		out[i] = BackendInfo{Name: b.name, URL: b.url, Region: b.region, State: status[i].StateName, Static: b.static,
			Weight: weights[i].Weight, Fallback: weights[i].Fallback || (b.last.Signals != nil && !b.last.Signals.Hardware),
			Policy: weights[i], Pending: views[i].Pending, Queued: views[i].Queued, AgeS: time.Since(b.lastSeen).Seconds(),
			Eligible: views[i].Eligible, Refused: b.refused, Status: status[i], Stats: b.last}
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
	for i, st := range s.core.Backends(s.now()) {
		out[s.backends[i].name] = st.StateName
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

func (s *Server) listBackends(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"router": s.cfg.ID, "policy": s.cfg.Policy, "backends": s.Backends()})
}

func writeJSON(w http.ResponseWriter, status int, v any) { openai.WriteJSON(w, status, v) }
