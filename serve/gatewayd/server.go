package gatewayd

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	core "github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
	"github.com/stargate-llm/stargate/telemetry"
	"github.com/stargate-llm/stargate/telemetry/scrape"
)

// Config describes one gateway.
type Config struct {
	// ID names the backend to routers; Region is where it runs.
	ID, Region string
	// Engines are the engine base URLs: one stargate engine (or any engine
	// serving several workers behind one URL), or one URL per GPU worker.
	Engines []string
	// DCGM are the URLs of the backend's DCGM exporters' metrics (a
	// stargate engine serves a mock one at /dcgm/metrics); none means no
	// hardware signals.
	DCGM []string
	// Workers behind a single engine URL; zero asks the engine's /metrics
	// (stargate_engine_workers) and falls back to 1.
	Workers int
	// Admission and Slots configure the gateway core.
	Admission core.Config
	Slots     core.SlotsConfig
	// Routers receive this gateway's stats; Advertise is the URL they use to
	// reach it.
	Routers   []string
	Advertise string
	// Key signs stats and fences and checks operator calls and routers'
	// requests; Keys, if set, are the keys by role instead (auth.Keyring).
	Key  auth.Key
	Keys *auth.Keyring
	// APIKeys admit clients to the data plane (the xDS/Envoy path);
	// Authenticators admit other callers (a router's client certificate).
	// With any of them, or a key, only routers and clients with an API key
	// get completions, unless OpenDataPlane.
	APIKeys        *auth.APIKeys
	Authenticators []auth.Authenticator
	OpenDataPlane  bool
	// OpenInfo serves /metrics to anyone; ExposeBackend names this gateway
	// in X-Stargate-Backend.
	OpenInfo, ExposeBackend bool
	// MaxBodyBytes bounds a request body; zero means 8 MiB.
	MaxBodyBytes int64
	// UpstreamIdleTimeout is the longest wait for the engine's next byte; a
	// request that waits longer ends as an uncertain completion.
	UpstreamIdleTimeout time.Duration
	// ScrapeInterval and FenceInterval pace the engine scrape and the fences
	// of quarantined workers.
	ScrapeInterval, FenceInterval time.Duration
	Logger                        *slog.Logger
	// ObserveQueue, if set, hears each request's wait at the gateway, from
	// its arrival to its hand-off to the engine (zero when admitted at
	// once), for in-process measurement (the live overlap study).
	ObserveQueue func(queued time.Duration)
	// Transport reaches engines and routers. Nil means a pooled net/http
	// default for routers and one for engines; set, it carries everything
	// but an h1 engine leg (EngineTransport).
	Transport http.RoundTripper
	// EngineTransport is how requests reach the engines: net/http (the
	// default, also when empty) or package h1's client (plain http://
	// engines on Unix only).
	EngineTransport EngineTransport
	// Engines not written for Stargate (vLLM, SGLang): see EngineOptions.
	EngineOptions
	// DialTLS, if set, opens the default transport's verified TLS
	// connections to https routers and engines (package tlsconf's Dialer).
	DialTLS func(ctx context.Context, network, addr string) (net.Conn, error)
}

// DefaultConfig returns a gateway with the core's defaults.
func DefaultConfig() Config {
	return Config{ID: "gateway", Admission: core.DefaultConfig(), Slots: core.DefaultSlotsConfig(),
		MaxBodyBytes: 8 << 20, UpstreamIdleTimeout: 60 * time.Second,
		ScrapeInterval: 500 * time.Millisecond, FenceInterval: 500 * time.Millisecond,
		EngineOptions: DefaultEngineOptions()}
}

// Validate reports what is wrong with a configuration.
func (c Config) Validate() error {
	var errs []error
	if c.ID == "" || strings.ContainsAny(c.ID, " \t\r\n/") {
		errs = append(errs, fmt.Errorf("id %q must be non-empty, without spaces or slashes", c.ID))
	}
	if len(c.Engines) == 0 {
		errs = append(errs, errors.New("no engine URL; give --engine URL (repeat it for one URL per GPU worker)"))
	}
	for _, u := range append(append(append([]string{}, c.Engines...), c.Routers...), c.DCGM...) {
		if err := checkURL(u); err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.Routers) > 0 {
		if err := checkURL(c.Advertise); err != nil {
			errs = append(errs, fmt.Errorf("--advertise: %w (routers need this gateway's URL)", err))
		}
		if ring := c.keyring(); ring == nil {
			errs = append(errs, errors.New("routers are given but no HMAC key to sign stats; give --hmac-key-file"))
		} else if _, ok := ring.Signing(auth.RoleGateway); !ok {
			errs = append(errs, errors.New("routers are given but the key file holds no gateway key to sign stats with"))
		}
	}
	if c.Workers < 0 || (len(c.Engines) > 1 && c.Workers > 1 && c.Workers != len(c.Engines)) {
		errs = append(errs, fmt.Errorf("workers %d: with several engine URLs each is one worker", c.Workers))
	}
	if c.MaxBodyBytes < 0 || c.UpstreamIdleTimeout <= 0 || c.ScrapeInterval <= 0 || c.FenceInterval <= 0 {
		errs = append(errs, errors.New("body limit must be >= 0 and the idle timeout, scrape and fence intervals > 0"))
	}
	if err := c.Admission.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.EngineTransport.validate(c.Engines); err != nil {
		errs = append(errs, err)
	}
	if err := c.Slots.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway config: %w", err)
	}
	return nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL with a host", s)
	}
	return nil
}

// Server is a running gateway. Build it with New, call Start, serve Handler.
type Server struct {
	cfg    Config
	start  time.Time
	log    *slog.Logger
	client *http.Client
	leg    engineLeg // the request path to the engines
	signer *auth.Signer
	ops    *auth.Verifier
	// callers admit data-plane requests (see admit).
	callers []auth.Authenticator
	met     *metrics
	loops   sync.WaitGroup

	mu       sync.Mutex
	adm      *core.Gateway
	slots    *core.Slots
	workers  []*remoteWorker
	waits    map[uint64]*waiter
	nextID   uint64
	routerIx map[string]int
	engine   engineInfo
	counts   wire.Counts
	poke     chan struct{}
	stopped  chan struct{}
	errs     telemetry.ErrorRate
	prevTTFT []scrape.Histogram
	started  bool
	admitBuf []core.Request
	// eh is what the gateway knows of each engine URL's health and
	// each worker's way out of quarantine (health.go).
	eh healthState
	// api serves the OpenAI, health, metrics and admin paths, over
	// HTTP/1.1 and over the HTTP/2 connections routers open (h2c).
	api http.Handler
	h2c *h2cServer
}

// waiter is a request waiting for the admission core or a worker permit.
type waiter struct {
	ready chan struct{} // capacity 1
	grant int           // worker, once granted (-1 before)
}

// engineInfo is what the gateway learned from the engine.
type engineInfo struct {
	models      []string
	maxModelLen int
	// ownedBy is the owned_by of the engine's first model ("" if none).
	ownedBy     string
	metrics     wire.EngineMetrics
	scrapedAt   time.Time
	hardwareErr string
	// cacheTokens is each engine URL's cache size as last scraped (see
	// scrape.Engine.CacheTokens; 0 unknown); an engine that fails a
	// scrape keeps its last size.
	cacheTokens []int
}

// New builds a gateway.
func New(cfg Config) (*Server, error) {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.loadAPIKey(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	tr := cfg.Transport
	if tr == nil {
		tr = &http.Transport{DialTLSContext: cfg.DialTLS, MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second,
			ForceAttemptHTTP2: false, DisableCompression: true}
	}
	s := &Server{cfg: cfg, start: time.Now(), log: cfg.Logger.With("gateway", cfg.ID), client: &http.Client{Transport: tr},
		waits: make(map[uint64]*waiter), routerIx: make(map[string]int), poke: make(chan struct{}, 1),
		stopped: make(chan struct{}), errs: telemetry.ErrorRate{HalfLife: 10 * time.Second}}
	s.initAuth()
	s.leg = newEngineLeg(cfg, s.client)
	s.met = newMetrics(s)
	s.api = s.newAPI()
	s.h2c = newH2CServer(s.api, s.log)
	return s, nil
}

func (s *Server) now() time.Duration { return time.Since(s.start) }

// Start learns the engine's workers and models (waiting for it up to ctx),
// builds the cores and starts the stats, scrape and fence loops, which run
// until ctx ends.
func (s *Server) Start(ctx context.Context) error {
	workers := s.cfg.Workers
	if len(s.cfg.Engines) > 1 {
		workers = len(s.cfg.Engines)
	}
	models, maxLen, found, err := s.discover(ctx)
	if err != nil {
		return err
	}
	if workers == 0 {
		workers = max(found, 1)
	}
	s.learnSlots(ctx)
	adm := s.cfg.Admission
	if adm.MaxConcurrency == 0 {
		adm.SlotsPerWorker = s.cfg.Slots.MaxInflightPerWorker
	}
	g, err := core.New(0, workers, adm)
	if err != nil {
		return fmt.Errorf("gateway %s: %w", s.cfg.ID, err)
	}
	g.Advertise(maxLen)
	var key []byte
	if ring := s.cfg.keyring(); ring != nil {
		k, _ := ring.Signing(auth.RoleGateway)
		key = k.Secret
	}
	if len(key) == 0 {
		key = auth.RandomKey("fence").Secret // fences fail until an operator sets a key
		s.log.Warn("no HMAC key: a worker quarantined after an uncertain completion can be neither fenced nor released and stays out of service until the gateway restarts; give the gateway and the engine the same key file")
	}
	slots, err := core.NewSlots(workers, s.cfg.Slots, key)
	if err != nil {
		return fmt.Errorf("gateway %s: %w", s.cfg.ID, err)
	}
	s.mu.Lock()
	s.adm, s.slots = g, slots
	s.workers = make([]*remoteWorker, workers)
	for i := range s.workers {
		s.workers[i] = newRemoteWorker(s.cfg.Slots.MaxInflightPerWorker)
	}
	s.engine.models, s.engine.maxModelLen = models, maxLen
	s.eh.init(len(s.cfg.Engines), workers)
	s.started = true
	s.mu.Unlock()
	s.lookAtEngines(ctx) // Loading from the first stats if the engine is not serving yet
	targets := make([]*routerTarget, len(s.cfg.Routers))
	for i, u := range s.cfg.Routers {
		targets[i] = &routerTarget{url: strings.TrimRight(u, "/"), mail: make(chan *core.Stats, 1)}
		s.goLoop(func() { s.pushLoop(ctx, targets[i]) })
	}
	s.goLoop(func() { s.statsLoop(ctx, targets) })
	s.goLoop(func() { s.scrapeLoop(ctx) })
	s.goLoop(func() { s.fenceLoop(ctx) })
	s.goLoop(func() { <-ctx.Done(); close(s.stopped); s.leg.closeIdle() })
	s.goLoop(func() {
		<-ctx.Done()
		grace, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.h2c.Shutdown(grace)
	})
	return nil
}

// CloseRouterConns closes every router's unencrypted HTTP/2 connection at
// once, as a crash would (the streams on them fail); HTTP/1.1 and TLS
// connections are the http.Server's to close.
func (s *Server) CloseRouterConns() { s.h2c.Close() }

func (s *Server) goLoop(f func()) {
	s.loops.Add(1)
	go func() { defer s.loops.Done(); f() }()
}

// Wait returns when the loops Start began have ended (after its ctx ends).
func (s *Server) Wait() { s.loops.Wait() }

// discover reads the engine's models and worker count, retrying until the
// engine answers or ctx ends.
func (s *Server) discover(ctx context.Context) (models []string, maxLen, workers int, err error) {
	delay := 50 * time.Millisecond
	for {
		models, maxLen, err = s.fetchModels(ctx)
		if err == nil {
			workers, _ = s.scrape(ctx)
			return models, maxLen, workers, nil
		}
		s.log.Info("waiting for the engine", "engine", s.cfg.Engines[0], "err", err)
		select {
		case <-ctx.Done():
			return nil, 0, 0, fmt.Errorf("gateway %s: engine %s did not answer /v1/models: %w", s.cfg.ID, s.cfg.Engines[0], err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
	}
}

func (s *Server) fetchModels(ctx context.Context) ([]string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.Engines[0]+"/v1/models", nil)
	if err != nil {
		return nil, 0, err
	}
	s.authorize(req.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, 0, fmt.Errorf("status %s", resp.Status)
	}
	var list struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
			OwnedBy     string `json:"owned_by"`
		} `json:"data"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(nil, resp.Body, 1<<20)).Decode(&list); err != nil {
		return nil, 0, fmt.Errorf("/v1/models is not a model list: %w", err)
	}
	if len(list.Data) > 0 && len(list.Data[0].OwnedBy) <= 256 {
		s.mu.Lock()
		s.engine.ownedBy = list.Data[0].OwnedBy
		s.mu.Unlock()
	}
	var models []string
	maxLen := 0
	for _, m := range list.Data {
		models = append(models, m.ID)
		maxLen = max(maxLen, m.MaxModelLen)
	}
	return models, maxLen, nil
}

// Handler serves the OpenAI API, /health, /metrics and the admin API over
// HTTP/1.1, and over HTTP/2 without TLS (h2c with prior knowledge, what
// routers open; see h2cServer) on the same port. Over TLS, the http.Server
// serves HTTP/2 itself where its ALPN offers h2.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isH2CPreface(r) {
			s.h2c.ServeHTTP(w, r)
			return
		}
		s.api.ServeHTTP(w, r)
	})
}

func (s *Server) newAPI() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.complete)
	mux.HandleFunc("POST /v1/completions", s.complete)
	mux.HandleFunc("POST /v1/responses", s.complete)
	mux.HandleFunc("POST /v1/embeddings", s.complete)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("GET /health", s.health)
	mux.Handle("GET /metrics", s.guardInfo(s.met.handler()))
	mux.HandleFunc("POST /admin/workers/{id}/release", s.release)
	return mux
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		http.Error(w, "starting: waiting for the engine", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("ok\n"))
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	models, maxLen, owner := s.engine.models, s.engine.maxModelLen, cmp.Or(s.engine.ownedBy, "stargate")
	s.mu.Unlock()
	data := make([]map[string]any, len(models))
	for i, m := range models {
		data[i] = map[string]any{"id": m, "object": "model", "owned_by": owner, "max_model_len": maxLen}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// release ends a worker's quarantine on an operator's signed request, for
// engines that cannot answer a fence.
func (s *Server) release(w http.ResponseWriter, r *http.Request) {
	if s.ops == nil {
		http.Error(w, "this gateway has no HMAC key; start it with --hmac-key-file to use the admin API", http.StatusNotFound)
		return
	}
	_, msg, err := s.ops.Verify(r, 1<<10, auth.RoleOperator)
	auth.Audit(s.log, r, msg, err)
	if err != nil {
		s.met.authRejected.Inc()
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	id, err := strconv.Atoi(r.PathValue("id"))
	s.mu.Lock()
	if err != nil || s.slots == nil || id < 0 || id >= len(s.workers) {
		s.mu.Unlock()
		http.Error(w, fmt.Sprintf("no worker %q; workers are 0-%d", r.PathValue("id"), len(s.workers)-1), http.StatusNotFound)
		return
	}
	grants, err := s.slots.OperatorRelease(id)
	s.wakeGrants(grants)
	if err == nil {
		s.eh.released(id, recoveredOperator)
		s.updateAdmissible()
	}
	s.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusConflict)
		return
	}
	s.log.Warn("operator released a worker from quarantine", "worker", id)
	s.pokeStats()
	writeJSON(w, http.StatusOK, map[string]any{"worker": id, "released": true})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) pokeStats() {
	select {
	case s.poke <- struct{}{}:
	default:
	}
}

// wakeGrants hands worker permits to waiting requests. Called with mu held.
func (s *Server) wakeGrants(grants []core.Grant) {
	for _, g := range grants {
		if wt, ok := s.waits[g.ID]; ok {
			wt.grant = g.Worker
			signal(wt.ready)
		}
	}
}

// wakeAdmitted tells requests the admission core admitted. Called with mu held.
func (s *Server) wakeAdmitted(admitted []core.Request) {
	for _, r := range admitted {
		if wt, ok := s.waits[r.ID]; ok {
			signal(wt.ready)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// retryAfter is the Retry-After of an overload answer, in whole seconds.
func retryAfter(wait time.Duration) string {
	return strconv.Itoa(int(math.Max(1, math.Ceil(wait.Seconds()))))
}

// nonce draws a fresh fence nonce.
func nonce() [16]byte {
	var n [16]byte
	_, _ = rand.Read(n[:])
	return n
}

// Quarantined lists the workers in quarantine.
func (s *Server) Quarantined() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for w := range s.workers {
		if s.slots != nil && s.slots.Quarantined(w) {
			out = append(out, w)
		}
	}
	return out
}
