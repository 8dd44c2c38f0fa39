package gatewayd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/serve/wire"
	"github.com/stargate-llm/stargate/telemetry/scrape"
)

// EngineOptions are what a gateway needs to serve engines not written for
// Stargate (vLLM, SGLang) as well as its own.
type EngineOptions struct {
	// MaxQueueWait bounds every wait in the gateway (for admission and for
	// a worker permit); a request that waits longer is answered 503 with
	// Retry-After, before any byte, so that its router retries elsewhere.
	// Keep it below the routers' attempt budget.
	MaxQueueWait time.Duration
	// EngineAPIKey, when set, goes to the engines as "Authorization: Bearer
	// KEY" on every call (vLLM's and SGLang's --api-key).
	EngineAPIKey string
	// EngineAPIKeyFile, when set, holds EngineAPIKey; New reads it.
	EngineAPIKeyFile string
	// LearnSlots sizes worker slots by what the engine says of its sequence
	// limit (see learnSlots) instead of Slots.MaxInflightPerWorker, which
	// stays the fallback.
	LearnSlots bool
	// RecoverOnRestart releases a quarantined worker without a fence when
	// its engine evidently restarted (process_start_time_seconds changed,
	// or its metrics stopped answering and came back) and its own metrics
	// then show nothing running or waiting over RecoverIdleScrapes scrapes
	// in a row. Off by default: the fence stays the proof, and engines
	// without one (vLLM, SGLang answer it 404) wait for an operator.
	RecoverOnRestart   bool
	RecoverIdleScrapes int
	// KeyFile is the path of the HMAC key file, named in the command the
	// quarantine warning gives an operator (nothing reads it here).
	KeyFile string
}

// DefaultEngineOptions: waits end after 5 s, slots come from the config
// (stargate gateway's --learn-slots, on by default, learns them), recovery
// without a fence is off (3 idle scrapes when on).
func DefaultEngineOptions() EngineOptions {
	return EngineOptions{MaxQueueWait: 5 * time.Second, RecoverIdleScrapes: 3}
}

// loadAPIKey reads EngineAPIKeyFile into EngineAPIKey.
func (o *EngineOptions) loadAPIKey() error {
	if o.EngineAPIKeyFile == "" {
		return nil
	}
	b, err := os.ReadFile(o.EngineAPIKeyFile)
	if err != nil {
		return fmt.Errorf("engine API key file: %w", err)
	}
	key := strings.TrimSpace(string(b))
	if key == "" || strings.ContainsAny(key, " \t\r\n") {
		return fmt.Errorf("engine API key file %s: want one key on one line", o.EngineAPIKeyFile)
	}
	o.EngineAPIKey = key
	return nil
}

func (o EngineOptions) validate() error {
	if o.MaxQueueWait <= 0 {
		return fmt.Errorf("max queue wait must be > 0 (keep it below the routers' attempt budget), got %v", o.MaxQueueWait)
	}
	if o.RecoverOnRestart && o.RecoverIdleScrapes < 1 {
		return fmt.Errorf("recovery on engine restart needs >= 1 idle scrape, got %d", o.RecoverIdleScrapes)
	}
	return nil
}

// How a quarantine ended, the label of stargate_gateway_recoveries_total.
const (
	recoveredFence    = "fence"
	recoveredOperator = "operator"
	recoveredRestart  = "engine_restart"
)

// healthState is the gateway's view of its engines' health and of each
// quarantined worker's evidence for release. Guarded by the Server's mu.
type healthState struct {
	engines    []engineHealth
	workers    []workerHealth
	recoveries map[string]uint64
}

type engineHealth struct {
	up        bool    // the last scrape (or request) reached it
	startTime float64 // process_start_time_seconds, 0 unknown
	idle      bool    // its metrics showed nothing running or waiting
	overWarn  bool    // warned that it runs more than the gateway allows
}

type workerHealth struct {
	startAt  float64 // the engine's start time when quarantined
	sawDown  bool    // its engine stopped answering since
	idleRuns int     // consecutive idle scrapes after a restart
	noFence  bool    // warned that its engine has no fence
}

func (h *healthState) init(engines, workers int) {
	h.engines = make([]engineHealth, engines)
	for i := range h.engines {
		h.engines[i].up = true
	}
	h.workers = make([]workerHealth, workers)
	h.recoveries = map[string]uint64{}
}

// released records the end of worker w's quarantine.
func (h *healthState) released(w int, how string) {
	if w >= 0 && w < len(h.workers) {
		h.workers[w] = workerHealth{}
	}
	h.recoveries[how]++
}

// authorize adds the engine API key to an upstream call's fields.
func (s *Server) authorize(h http.Header) {
	if s.cfg.EngineAPIKey != "" {
		h.Set("Authorization", "Bearer "+s.cfg.EngineAPIKey)
	}
}

// admissible counts the workers that can take a request: not quarantined,
// their engine answering. Called with mu held.
func (s *Server) admissible() int {
	n := 0
	for w := range s.workers {
		if !s.slots.Quarantined(w) && s.eh.engines[s.engineOf(w)].up {
			n++
		}
	}
	return n
}

// updateAdmissible hands the admission core the admissible workers, so that
// the next stats (due at once, a change) show only capacity the gateway can
// use, and wakes requests a grown capacity admits. Called with mu held.
func (s *Server) updateAdmissible() {
	if s.adm == nil {
		return
	}
	s.admitBuf = s.adm.SetAdmissible(s.now(), s.admissible(), s.admitBuf[:0])
	s.wakeAdmitted(s.admitBuf)
}

// engineDown marks engine e unreachable until a scrape reaches it again.
// Called with mu held.
func (s *Server) engineDown(e int) {
	if s.eh.engines == nil || !s.eh.engines[e].up {
		return
	}
	s.eh.engines[e].up = false
	for w := range s.eh.workers {
		if s.engineOf(w) == e && s.slots.Quarantined(w) {
			s.eh.workers[w].sawDown = true
		}
	}
	s.log.Warn("engine unreachable: its capacity is out of the stats until a scrape reaches it", "engine", s.cfg.Engines[e])
	s.updateAdmissible()
}

// quarantined makes a worker's quarantine loud: a WARN naming the command
// that releases it, and (stargate_gateway_quarantined_workers) a gauge an
// alert can use. Called with mu held.
func (s *Server) quarantined(w int) {
	wh, eh := &s.eh.workers[w], &s.eh.engines[s.engineOf(w)]
	// An engine already seen down when the quarantine starts (it died, and
	// a scrape or a failed send noticed before the stream's end did) counts
	// as down for this quarantine: its coming back is the restart.
	*wh = workerHealth{startAt: eh.startTime, sawDown: !eh.up}
	how := "until the engine answers a fence (POST /admin/fence) or an operator releases it"
	if s.cfg.RecoverOnRestart {
		how += fmt.Sprintf(", or its engine restarts and runs nothing for %d scrapes", s.cfg.RecoverIdleScrapes)
	}
	s.log.Warn("worker quarantined after an uncertain completion: it takes nothing "+how,
		"worker", w, "engine", s.engineURL(w), "release", s.releaseCommand(w))
	s.updateAdmissible()
}

// releaseCommand is the operator's command that ends worker w's quarantine.
func (s *Server) releaseCommand(w int) string {
	url := s.cfg.Advertise
	if url == "" {
		url = "http://GATEWAY"
	}
	key := s.cfg.KeyFile
	if key == "" {
		key = "KEY_FILE"
	}
	return fmt.Sprintf("stargate admin release %d --gateway %s --key-file %s --id %s", w, url, key, s.cfg.ID)
}

// noFence notes that worker w's engine answered the fence 404 (vLLM,
// SGLang): once per quarantine, a WARN saying how it will come back.
func (s *Server) noFence(w int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w >= len(s.eh.workers) || s.eh.workers[w].noFence {
		return
	}
	s.eh.workers[w].noFence = true
	if s.cfg.RecoverOnRestart {
		s.log.Warn("engine has no fence (404): the worker comes back when its engine restarts and runs nothing, or by an operator",
			"worker", w, "release", s.releaseCommand(w))
		return
	}
	s.log.Warn("engine has no fence (404): the worker stays quarantined until an operator releases it (or start the gateway with --recover-on-engine-restart)",
		"worker", w, "release", s.releaseCommand(w))
}

// observeEngines applies one scrape round's findings: engines that did or
// did not answer, their start times and load; then the restart recovery
// of quarantined workers and the over-limit warning. Called with mu held.
func (s *Server) observeEngines(found []engineScrape) {
	for e, f := range found {
		eh := &s.eh.engines[e]
		if !f.ok {
			s.engineDown(e)
			continue
		}
		if !eh.up {
			s.log.Info("engine answers again", "engine", s.cfg.Engines[e])
		}
		eh.up = true
		eh.idle = f.m.Running == 0 && f.m.Waiting == 0
		if f.m.StartTime > 0 {
			eh.startTime = f.m.StartTime
		}
		s.warnOverLimit(e, f.m.Running)
	}
	for w := range s.eh.workers {
		if s.slots.Quarantined(w) {
			s.restartEvidence(w)
		}
	}
	s.updateAdmissible()
}

// engineScrape is one engine's scrape: its metrics, or ok false.
type engineScrape struct {
	m  scrape.Engine
	ok bool
}

// restartEvidence counts the idle scrapes of quarantined worker w's engine
// after a restart and, with RecoverOnRestart, releases w after enough in a
// row. Called with mu held.
func (s *Server) restartEvidence(w int) {
	wh, eh := &s.eh.workers[w], &s.eh.engines[s.engineOf(w)]
	if !eh.up {
		wh.sawDown, wh.idleRuns = true, 0
		return
	}
	// Evidence of a restart: the engine was seen down, or its start time
	// changed. A start time not known when the quarantine began (the engine
	// died before its first scrape) cannot change, so then idle scrapes
	// alone count: an engine that runs and queues nothing holds no lost
	// request either.
	restarted := wh.sawDown || wh.startAt == 0 || (eh.startTime > 0 && eh.startTime != wh.startAt)
	if !restarted || !eh.idle || s.slots.Inflight(w) > 0 {
		wh.idleRuns = 0
		return
	}
	wh.idleRuns++
	if !s.cfg.RecoverOnRestart || wh.idleRuns < s.cfg.RecoverIdleScrapes {
		return
	}
	grants, err := s.slots.OperatorRelease(w)
	if err != nil {
		return
	}
	s.wakeGrants(grants)
	s.eh.released(w, recoveredRestart)
	s.log.Warn("worker released from quarantine: its engine restarted and ran nothing for consecutive scrapes",
		"worker", w, "scrapes", s.cfg.RecoverIdleScrapes)
}

// warnOverLimit warns, once until it falls back, when engine e runs more
// sequences than the gateway allows it: something else sends it work, or
// the gateway's slots are set too low. Called with mu held.
func (s *Server) warnOverLimit(e int, running float64) {
	workers := 1
	if len(s.cfg.Engines) == 1 {
		workers = len(s.workers)
	}
	allowed := s.cfg.Slots.MaxInflightPerWorker * workers
	eh := &s.eh.engines[e]
	switch {
	case running > float64(allowed) && !eh.overWarn:
		eh.overWarn = true
		s.log.Warn("engine runs more sequences than the gateway allows it: another client shares it, or --max-inflight-per-worker is below the engine's limit",
			"engine", s.cfg.Engines[e], "running", running, "allowed", allowed)
	case running <= float64(allowed):
		eh.overWarn = false
	}
}

// learnSlots sets the slots per worker from what the engines say of their
// sequence limit, the smallest over the engine URLs: the max_num_seqs label
// of vllm:cache_config_info (a stargate engine's; vLLM's own metrics do not
// carry it), else SGLang's GET /get_server_info max_running_requests.
// Engines that say nothing leave Slots.MaxInflightPerWorker (the flag).
func (s *Server) learnSlots(ctx context.Context) {
	if !s.cfg.LearnSlots {
		return
	}
	learned := 0
	for _, base := range s.cfg.Engines {
		n, source := s.engineMaxSeqs(ctx, base)
		if n <= 0 {
			s.log.Info("engine does not say its sequence limit; slots per worker from --max-inflight-per-worker",
				"engine", base, "slots", s.cfg.Slots.MaxInflightPerWorker)
			return
		}
		s.log.Info("engine's sequence limit learned", "engine", base, "max_seqs", n, "from", source)
		if learned == 0 || n < learned {
			learned = n
		}
	}
	if s.cfg.Workers > 1 && len(s.cfg.Engines) == 1 {
		learned = max(learned/s.cfg.Workers, 1) // the limit is the engine's, shared by its workers
	}
	s.cfg.Slots.MaxInflightPerWorker = learned
}

// engineMaxSeqs asks one engine its sequence limit; 0 if it does not say.
func (s *Server) engineMaxSeqs(ctx context.Context, base string) (int, string) {
	if body, err := s.get(ctx, base+"/metrics", scrape.MaxBytes); err == nil {
		if e, err := scrape.ParseEngine(bytes.NewReader(body)); err == nil && e.MaxSeqs > 0 {
			return e.MaxSeqs, "/metrics " + e.Kind + ":cache_config_info max_num_seqs"
		}
	}
	body, err := s.get(ctx, base+"/get_server_info", 1<<20)
	if err != nil {
		return 0, ""
	}
	var info struct {
		MaxRunningRequests *int `json:"max_running_requests"`
	}
	if json.Unmarshal(body, &info) != nil || info.MaxRunningRequests == nil || *info.MaxRunningRequests <= 0 || *info.MaxRunningRequests > 1<<20 {
		return 0, ""
	}
	return *info.MaxRunningRequests, "/get_server_info max_running_requests"
}

// errQueueTimeout ends a wait that outlived MaxQueueWait.
var errQueueTimeout = errors.New("gateway: waited longer than the queue deadline")

// timedOut answers a request whose wait for admission or a worker permit
// outlived MaxQueueWait: it gives back what it held and answers 503 with
// Retry-After before any byte, so that its router retries elsewhere.
func (s *Server) timedOut(w http.ResponseWriter, id uint64) {
	wait := s.giveBack(id, ReasonQueueTimeout, false)
	s.pokeStats()
	w.Header().Set("Retry-After", retryAfter(wait))
	w.Header().Set(wire.HeaderBackend, s.cfg.ID)
	openai.WriteError(w, http.StatusServiceUnavailable, "ServiceUnavailableError",
		fmt.Sprintf("gateway %s: %v (%v); no worker could take the request", s.cfg.ID, errQueueTimeout, s.cfg.MaxQueueWait))
}

// waitDeadline is the context of a request's waits in the gateway.
func (s *Server) waitDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.MaxQueueWait)
}
