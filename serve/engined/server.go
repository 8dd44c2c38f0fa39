package engined

import (
	crand "crypto/rand"
	"encoding/hex"
	"log/slog"
	"math/rand/v2"

	"context"
	"errors"
	"fmt"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/serve/wire"
	"net/http"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/cluster"
	core "github.com/stargate-llm/stargate/engine"
)

// Config describes one mock engine.
type Config struct {
	GPUs        int
	Profile     core.Profile
	Model       string
	MaxModelLen int
	Seed        uint64
	// MaxBodyBytes bounds a request body; zero means 8 MiB.
	MaxBodyBytes int64
	// DefaultMaxTokens is the output length when a request names none.
	DefaultMaxTokens int
	// Key signs answers to a gateway's idle fence (POST /admin/fence) and
	// checks an operator's signed calls (POST /admin/faults); without it
	// those endpoints answer 404 and a quarantined worker waits for an
	// operator at its gateway.
	Key auth.Key
	// Keys, if set, check operators' calls instead of Key (auth.Keyring:
	// operator-role keys); ID names this engine as their audience
	// ("engine/ID"; default "engine").
	Keys *auth.Keyring
	ID   string
	// Logger takes the audit lines of admin calls; nil discards them.
	Logger *slog.Logger
	// Faults are injected from the start (see Faults).
	Faults Faults
	// StampTTFT precedes each stream's first content event with an SSE
	// comment, ": stargate-engine ttft_us=N", the engine's own time from
	// the request's arrival to that event. A benchmark subtracts it from
	// the TTFT its client saw to get the time spent outside the engine, per
	// request. SSE clients skip comment lines.
	StampTTFT bool
	// Compat selects whose behaviour to copy where engines differ (see
	// CompatVLLM); CompatVLLM serves one worker (GPUs must be 1).
	Compat Compat
	// APIKey, when set, is required on every /v1 path as
	// "Authorization: Bearer KEY", as vLLM's --api-key does.
	APIKey string
	// LoadTime is how long the engine loads its weights after New: until
	// then it answers /health 503, lists no model and refuses completions
	// 503, as a vLLM engine does between its start and serving.
	LoadTime time.Duration
}

// TTFTStamp starts the SSE comment StampTTFT writes; the microseconds
// follow it.
const TTFTStamp = ": stargate-engine ttft_us="

// DefaultModel is the model name a mock engine serves unless told otherwise.
const DefaultModel = "stargate-mock"

// DefaultConfig is one half-scale GPU serving DefaultModel.
func DefaultConfig() Config {
	return Config{GPUs: 1, Profile: core.HalfProfile(), Model: DefaultModel, MaxModelLen: 32768, Seed: 1,
		MaxBodyBytes: 8 << 20, DefaultMaxTokens: 128}
}

// Validate reports what is wrong with a configuration.
func (c Config) Validate() error {
	var errs []error
	if c.GPUs < 1 || c.GPUs > 1024 {
		errs = append(errs, fmt.Errorf("gpus must be 1-1024, got %d", c.GPUs))
	}
	if err := c.Profile.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Model == "" {
		errs = append(errs, errors.New("model name is empty"))
	}
	if c.MaxModelLen < 2 || c.MaxModelLen > c.Profile.KVTokens {
		errs = append(errs, fmt.Errorf("max_model_len must be 2-%d (the KV budget), got %d", c.Profile.KVTokens, c.MaxModelLen))
	}
	if c.MaxBodyBytes < 0 || c.DefaultMaxTokens < 1 {
		errs = append(errs, fmt.Errorf("max body bytes must be >= 0 and default max tokens >= 1, got %d and %d", c.MaxBodyBytes, c.DefaultMaxTokens))
	}
	if err := c.Faults.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.LoadTime < 0 {
		errs = append(errs, fmt.Errorf("load time must be >= 0, got %v", c.LoadTime))
	}
	if _, err := ParseCompat(string(c.Compat)); err != nil {
		errs = append(errs, err)
	} else if c.Compat == CompatVLLM && c.GPUs != 1 {
		errs = append(errs, fmt.Errorf("compat vllm serves one worker per URL, got gpus %d; run one engine per worker", c.GPUs))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("engine config: %w", err)
	}
	return nil
}

// Server is a running mock engine. Create it with New, serve its Handler,
// and stop it by cancelling the context given to Run.
type Server struct {
	cfg   Config
	start time.Time

	mu     sync.Mutex
	cl     *cluster.Backend
	active map[uint64]*stream
	nextID uint64
	// idTag starts every completion id after its kind: random per process,
	// so that engines behind one router never repeat each other's ids.
	idTag string
	poke  chan struct{}
	// stopped closes when Run returns: handlers stop waiting for steps.
	stopped chan struct{}
	metrics *metrics
	events  []core.Event // scratch for advance
	counts  Counts
	admin   *auth.Verifier
	faults  faultState
	// lastBusy and lastDCGM are each worker's busy time and the time at the
	// previous exporter scrape.
	lastBusy []time.Duration
	lastDCGM time.Duration
}

// Counts says how the engine's requests ended (see wire.Counts).
type Counts = wire.Counts

// Counts returns a copy of the engine's accounting.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts.Clone()
}

// stream is one request's state between the driver and its handler.
type stream struct {
	worker    int
	submitted time.Duration
	generated int // tokens produced so far (driver writes, handler reads under mu)
	done      bool
	cached    int
	notify    chan struct{} // capacity 1: "something changed"
}

// New builds a server; call Run to start its clock.
func New(cfg Config) (*Server, error) {
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = 8 << 20
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// One step per event: the driver streams tokens after every step.
	cl, err := cluster.New(cfg.GPUs, cfg.Profile, core.Options{MaxStepsPerRun: 1})
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, start: time.Now(), cl: cl, active: make(map[uint64]*stream),
		poke: make(chan struct{}, 1), stopped: make(chan struct{})}
	s.metrics = newMetrics(s)
	s.idTag = randomTag()
	s.lastBusy = make([]time.Duration, cfg.GPUs)
	s.faults = faultState{Faults: cfg.Faults, rng: rand.New(rand.NewPCG(cfg.Seed, 0x6661756c74))}
	s.applyThermal(0)
	if cfg.ID == "" {
		cfg.ID = "engine"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s.cfg = cfg
	if ring := auth.RingOf(cfg.Key, cfg.Keys); ring != nil {
		s.admin = auth.NewVerifier(auth.Audience("engine", cfg.ID), auth.DefaultMaxSkew, ring.Keys()...)
	}
	return s, nil
}

func (s *Server) now() time.Duration { return time.Since(s.start) }

// Run drives the workers on the real clock until ctx ends.
func (s *Server) Run(ctx context.Context) {
	defer close(s.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := s.now()
		next := s.advance(now)
		s.mu.Unlock()
		wait := time.Hour
		if next >= 0 {
			wait = next - now
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-s.poke:
		case <-timer.C:
		}
	}
}

// advance runs every step that has ended by now and returns when the next one
// ends (-1 if all workers are idle). Called with mu held.
func (s *Server) advance(now time.Duration) time.Duration {
	next := time.Duration(-1)
	if f := &s.faults; f.Slowdown >= 1 && f.Ramp > 0 && now-f.since <= f.Ramp+time.Second {
		s.applyThermal(now) // the throttle ramps in
		next = now + 100*time.Millisecond
	}
	for w := range s.cl.Len() {
		worker := s.cl.Worker(w)
		for {
			at, ok := worker.NextEventAt()
			if !ok {
				break
			}
			if at > now {
				if next < 0 || at < next {
					next = at
				}
				break
			}
			s.events = worker.Advance(at, s.events[:0])
			s.deliver(w, s.events)
		}
	}
	return next
}

// deliver tells the handlers of worker w's requests what its last step did.
// Called with mu held.
func (s *Server) deliver(w int, events []core.Event) {
	worker := s.cl.Worker(w)
	for id, st := range s.active {
		if st.worker != w || st.done {
			continue
		}
		if g, ok := worker.Progress(id); ok && g != st.generated {
			if st.generated == 0 {
				s.metrics.ttft.Observe((s.now() - st.submitted).Seconds())
			}
			st.generated = g
			signal(st.notify)
		}
	}
	for _, ev := range events {
		if st, ok := s.active[ev.ID]; ok && ev.Kind == core.Finished {
			if st.generated == 0 {
				s.metrics.ttft.Observe((s.now() - st.submitted).Seconds())
			}
			st.generated, st.cached, st.done = ev.OutputTokens, ev.CachedTokens, true
			s.metrics.e2e.Observe((s.now() - st.submitted).Seconds())
			s.metrics.prefixQueries.Add(float64(ev.PromptTokens))
			s.metrics.prefixHits.Add(float64(ev.CachedTokens))
			s.metrics.promptTokens.Add(float64(ev.PromptTokens))
			s.metrics.generationToks.Add(float64(ev.OutputTokens))
			signal(st.notify)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// submit places a request on worker (or the picker's choice when worker < 0)
// and wakes the driver.
func (s *Server) submit(worker int, session uint64, prompt, output int) (uint64, *stream, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id := s.nextID
	now := s.now()
	// The driver may not have woken yet for steps that ended: run them first,
	// so the request joins the worker as it is now, not as it was.
	s.advance(now)
	req := core.Request{ID: id, Session: session, PromptTokens: prompt, OutputTokens: output}
	var err error
	if worker < 0 {
		worker, err = s.cl.Submit(now, req)
	} else {
		err = s.cl.Worker(worker).Submit(now, req)
	}
	if err != nil {
		return 0, nil, err
	}
	w := worker
	st := &stream{worker: w, submitted: now, notify: make(chan struct{}, 1)}
	s.active[id] = st
	signal(s.poke)
	return id, st, nil
}

// read returns what the driver has produced for a request so far.
func (s *Server) read(st *stream) (generated, cached int, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return st.generated, st.cached, st.done
}

// finish forgets a request; if it is still running, the worker drops it.
func (s *Server) finish(id uint64, st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case st.done:
		s.counts.Completed++
	default:
		s.cl.Worker(st.worker).Cancel(s.now(), id)
		signal(s.poke)
		select {
		case <-s.stopped:
			s.counts.End("shutting_down", true)
		default:
			s.counts.End("client_cancelled", true)
		}
	}
	delete(s.active, id)
}

// Totals returns each worker's engine counters (steps, busy time, batch
// and KV integrals, preemptions), brought up to now.
func (s *Server) Totals() []core.Totals {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	s.advance(now)
	out := make([]core.Totals, s.cl.Len())
	for w := range out {
		s.cl.Worker(w).Sync(now)
		out[w] = s.cl.Worker(w).Totals()
	}
	return out
}

// Active is the number of requests the server holds.
func (s *Server) Active() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.active)
}

// Handler serves the OpenAI-compatible API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, true) })
	mux.HandleFunc("POST /v1/completions", func(w http.ResponseWriter, r *http.Request) { s.complete(w, r, false) })
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /tokenize", s.tokenize)
	mux.HandleFunc("POST /admin/faults", s.adminFaults)
	mux.HandleFunc("GET /health", s.health)
	mux.Handle("GET /metrics", s.metrics.handler())
	var h http.Handler = mux
	if s.vllm() {
		h = detailMux{mux} // no fence, no DCGM exporter: vLLM has neither
	} else {
		mux.HandleFunc("POST /admin/fence", s.fence)
		mux.HandleFunc("GET /dcgm/metrics", s.dcgm)
	}
	h = s.whileLoading(h)
	if s.cfg.APIKey != "" {
		h = requireAPIKey(s.cfg.APIKey, h)
	}
	return h
}

func (s *Server) models(w http.ResponseWriter, _ *http.Request) {
	owner := "stargate"
	if s.vllm() {
		owner = "vllm"
	}
	openai.WriteJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{"id": s.cfg.Model, "object": "model", "created": s.start.Unix(), "owned_by": owner,
			"root": s.cfg.Model, "parent": nil, "max_model_len": s.cfg.MaxModelLen}},
	})
}

// randomTag is 8 random hex digits.
func randomTag() string {
	var b [4]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}
