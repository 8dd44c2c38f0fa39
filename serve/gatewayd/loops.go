package gatewayd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	core "github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/internal/wait"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/wire"
	"github.com/stargate-llm/stargate/telemetry"
	"github.com/stargate-llm/stargate/telemetry/scrape"
)

// routerTarget is one router this gateway reports to.
type routerTarget struct {
	url  string
	mail chan *core.Stats // holds the latest stats not yet sent
	name string           // the router's id, from its first reply
}

// statsLoop takes a stats message from the core whenever one is due and
// hands it to every router's push loop; a slow router gets the latest only.
func (s *Server) statsLoop(ctx context.Context, targets []*routerTarget) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-s.poke:
		}
		s.mu.Lock()
		now := s.now()
		var st *core.Stats
		if now >= s.adm.NextStatsAt() {
			st = s.adm.TakeStats(now)
		}
		next := s.adm.NextStatsAt() - now
		s.mu.Unlock()
		if st != nil {
			for _, t := range targets {
				select {
				case <-t.mail: // drop the stale one
				default:
				}
				t.mail <- st
			}
		}
		timer.Reset(max(next, time.Millisecond))
	}
}

// pushLoop sends one router the latest stats, signed.
func (s *Server) pushLoop(ctx context.Context, t *routerTarget) {
	failures := 0
	for {
		var st *core.Stats
		select {
		case <-ctx.Done():
			return
		case st = <-t.mail:
		}
		if err := s.push(ctx, t, st); err != nil {
			failures++
			if failures == 1 || failures%100 == 0 {
				s.log.Warn("stats push failed", "router", t.url, "failures", failures, "err", err)
			}
			continue
		}
		failures = 0
	}
}

func (s *Server) push(ctx context.Context, t *routerTarget, st *core.Stats) error {
	err := s.pushTo(ctx, t, st)
	if name, ok := otherReplica(err, t.name); ok {
		t.name = name // first contact, or the address now reaches another replica
		err = s.pushTo(ctx, t, st)
	}
	return err
}

func (s *Server) pushTo(ctx context.Context, t *routerTarget, st *core.Stats) error {
	msg := s.message(st, t.name)
	body, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	// For the one replica behind the address (see otherReplica).
	req, err := s.signer.NewRequest(auth.Audience("router", t.name), http.MethodPost, t.url+wire.PathStats, body)
	if err != nil {
		return err
	}
	var reply wire.StatsReply
	if err := s.exchange(ctx, req, "router", &reply); err != nil {
		return err
	}
	t.name = reply.Router
	s.met.pushes.Inc()
	return nil
}

// message builds the wire stats for one router.
func (s *Server) message(st *core.Stats, router string) wire.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var received uint64
	if i, ok := s.routerIx[router]; ok && router != "" && i < len(st.Received) {
		received = st.Received[i]
	}
	quarantined := 0
	for i := range s.workers {
		if s.slots.Quarantined(i) {
			quarantined++
		}
	}
	em := s.engine.metrics
	if !s.engine.scrapedAt.IsZero() {
		em.ScrapedAgo = time.Since(s.engine.scrapedAt).Seconds()
	}
	// Capacity 0 (no admissible worker) goes out as 1, the least a router
	// accepts, with the backend reported Loading, which no router places on.
	return wire.Stats{Backend: s.cfg.ID, URL: s.cfg.Advertise, Region: s.cfg.Region, Seq: st.Seq,
		Models: s.engine.models, MaxModelLen: s.engine.maxModelLen, OwnedBy: s.engine.ownedBy, Workers: len(s.workers), Quarantined: quarantined, CacheTokens: s.cacheTokens(),
		Capacity: max(st.Capacity, 1), Active: st.Active, Waiting: st.Waiting, InputTPS: st.InputTPS, MaxInputTPS: st.MaxInputTPS,
		Received: received, Completed: st.Completed, Rejected: st.Rejected, Cancelled: st.Cancelled,
		Engine: em, Interval: s.cfg.Admission.HeartbeatInterval, Signals: st.Signals, HardwareError: s.engine.hardwareErr}
}

// scrapeLoop reads the engine's /metrics (and the DCGM exporters) every
// ScrapeInterval and attaches the signals to the stats.
func (s *Server) scrapeLoop(ctx context.Context) {
	wait.Every(ctx, s.cfg.ScrapeInterval, func() { _, _ = s.scrape(ctx) })
}

// scrape reads vLLM's (or SGLang's) load metrics, summed over the engine
// URLs, and the DCGM exporters' GPU fields, and builds the telemetry
// signals. It returns the worker count a stargate engine reports.
func (s *Server) scrape(ctx context.Context) (workers int, err error) {
	var em wire.EngineMetrics
	sig := &telemetry.Signals{State: telemetry.Ready}
	var ttft []scrape.Histogram
	found := make([]engineScrape, len(s.cfg.Engines))
	for i, base := range s.cfg.Engines {
		body, err := s.get(ctx, base+"/metrics", scrape.MaxBytes)
		var e scrape.Engine
		if err == nil {
			e, err = scrape.ParseEngine(bytes.NewReader(body))
		}
		if err != nil {
			em.Error = err.Error()
			continue
		}
		found[i] = engineScrape{m: e, ok: true}
		em.Running += e.Running
		em.Waiting += e.Waiting
		em.KVUsage += e.KVFill / float64(len(s.cfg.Engines))
		workers += engineWorkers(body)
		if e.HasTTFT {
			ttft = append(ttft, e.TTFT)
		}
	}
	probe := s.probeEngines(ctx)
	var gpus []telemetry.GPUValues
	hwErr := ""
	for _, u := range s.cfg.DCGM {
		body, err := s.get(ctx, u, scrape.MaxBytes)
		var g []telemetry.GPUValues
		if err == nil {
			g, err = scrape.ParseDCGM(bytes.NewReader(body))
		}
		if err != nil {
			hwErr = err.Error()
			gpus = nil
			break
		}
		gpus = append(gpus, g...)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.engine.metrics = em
	s.noteCacheTokens(found)
	if s.adm != nil {
		s.observeEngines(found)
		s.observeLifecycle(probe)
	}
	if em.Error != "" {
		return 0, fmt.Errorf("scraping the engine: %s", em.Error)
	}
	s.engine.scrapedAt = time.Now()
	if s.adm == nil {
		return workers, nil // not started: discovery only
	}
	now := s.now()
	sig.At = now
	sig.Running = int(em.Running)
	sig.QueueDepth = int(em.Waiting) + s.adm.Waiting() + s.slots.Waiting()
	sig.KVFill = em.KVUsage
	sig.ErrorRate = s.errs.Rate(now)
	sig.MaxModelLen = s.engine.maxModelLen
	// p95 TTFT of the requests since the last scrape, over all engines.
	if len(ttft) == len(s.prevTTFT) {
		var worst float64
		for i, h := range ttft {
			if q, ok := h.Sub(s.prevTTFT[i]).Quantile(0.95); ok {
				worst = max(worst, q)
			}
		}
		sig.TTFTP95 = time.Duration(worst * float64(time.Second))
	}
	s.prevTTFT = ttft
	telemetry.Hardware(sig, gpus)
	s.engine.hardwareErr = hwErr
	s.adm.SetSignals(now, sig)
	return workers, nil
}

// engineWorkers reads stargate_engine_workers from a stargate engine's
// metrics text (0 from other engines).
func engineWorkers(body []byte) int {
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, "stargate_engine_workers"); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				continue
			}
			if n, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil && n >= 1 && n <= 1<<16 {
				return int(n)
			}
		}
	}
	return 0
}

// get reads a URL's body, at most limit bytes.
func (s *Server) get(ctx context.Context, url string, limit int64) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain")
	s.authorize(req.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", url, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err == nil && int64(len(body)) > limit {
		err = fmt.Errorf("%s: more than %d bytes", url, limit)
	}
	return body, err
}

// fenceLoop fences quarantined workers whose leases have drained.
func (s *Server) fenceLoop(ctx context.Context) {
	wait.Every(ctx, s.cfg.FenceInterval, func() {
		for _, c := range s.dueChallenges() {
			if err := s.fence(ctx, c); err != nil {
				s.log.Debug("fence did not restore the worker", "worker", c.Worker, "err", err)
			}
		}
	})
}

// dueChallenges issues a fence challenge to every quarantined worker with
// nothing in flight.
func (s *Server) dueChallenges() []core.Challenge {
	s.mu.Lock()
	defer s.mu.Unlock()
	var due []core.Challenge
	for w := range s.workers {
		if s.slots.Quarantined(w) && s.slots.Inflight(w) == 0 {
			if c, err := s.slots.Challenge(w, nonce()); err == nil {
				due = append(due, c)
			}
		}
	}
	return due
}

// fence asks the worker's engine to state that it is idle and hands the
// answer to the core, which decides.
func (s *Server) fence(ctx context.Context, c core.Challenge) error {
	body, _ := json.Marshal(engined.FenceMessage(c))
	req, err := http.NewRequest(http.MethodPost, s.engineURL(c.Worker)+"/admin/fence", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	s.authorize(req.Header)
	var m engined.FenceMessage
	if err := s.exchange(ctx, req, "engine", &m); err != nil {
		var se *statusError
		if errors.As(err, &se) && se.code == http.StatusNotFound {
			s.noFence(c.Worker)
		}
		return err
	}
	s.mu.Lock()
	grants, err := s.slots.Fence(core.IdleStatement(m))
	s.wakeGrants(grants)
	if err == nil {
		s.eh.released(c.Worker, recoveredFence)
		s.updateAdmissible()
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.log.Info("worker restored by a fence", "worker", c.Worker)
	s.pokeStats()
	return nil
}

// exchange sends req, giving it 2 s, and decodes a 200 answer's JSON into
// out; any other status is an error that quotes who answered.
func (s *Server) exchange(ctx context.Context, req *http.Request, who string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := s.client.Do(req.WithContext(ctx))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return &statusError{code: resp.StatusCode, msg: fmt.Sprintf("%s answered %s: %s", who, resp.Status, bytes.TrimSpace(b)),
			router: resp.Header.Get(wire.HeaderRouter)}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 4096)).Decode(out); err != nil {
		return fmt.Errorf("%s's answer: %w", who, err)
	}
	return nil
}

// statusError is an answer other than 200 to an exchange.
type statusError struct {
	code   int
	msg    string
	router string // the replica that answered, if it said (X-Stargate-Router)
}

func (e *statusError) Error() string { return e.msg }

// noteCacheTokens keeps the cache size of each engine scraped this round.
// Called with mu held.
func (s *Server) noteCacheTokens(found []engineScrape) {
	if len(s.engine.cacheTokens) != len(found) {
		s.engine.cacheTokens = make([]int, len(found))
	}
	for i, f := range found {
		if f.ok {
			s.engine.cacheTokens[i] = f.m.CacheTokens
		}
	}
}

// cacheTokens is the gateway's cache size for its stats: the sum over its
// engine URLs, each a separate engine whose labels already count all of
// its GPUs (one engine shared by several workers is counted once), capped
// at telemetry.MaxCacheTokens; 0 if any engine's size is unknown, as a part
// would understate the whole. Called with mu held.
func (s *Server) cacheTokens() int {
	total := 0
	for _, n := range s.engine.cacheTokens {
		if n <= 0 {
			return 0
		}
		total = wire.ClampCacheTokens(total + n) // each n <= 2^31-1: no overflow
	}
	return total
}
