package gatewayd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	core "github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/internal/h1"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/serve/wire"
)

// Reasons a request ends other than completed: the label of the gateway's
// failed and rejected counts.
const (
	ReasonOverloaded        = "overloaded"
	ReasonBadRequest        = "bad_request"
	ReasonNotStarted        = "not_started"
	ReasonClientCancelled   = "client_cancelled"
	ReasonEngineUnreachable = "engine_unreachable"
	ReasonEngineLost        = "engine_lost"
	ReasonEngineStatus      = "engine_error"
	ReasonEngineRefused     = "engine_refused"
	ReasonShutdown          = "shutting_down"
	ReasonUnauthorized      = "unauthorized"
	// ReasonQueueTimeout: no admission or worker permit within MaxQueueWait.
	ReasonQueueTimeout = "queue_timeout"
)

// Counts is how the gateway's requests ended (see wire.Counts).
type Counts = wire.Counts

// Counts returns how the gateway's requests ended so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts.Clone()
}

// end records how an accepted request ended. Called with mu held.
func (s *Server) end(reason string, failed bool) { s.counts.End(reason, failed) }

// rejectNow answers a request that was never admitted.
func (s *Server) rejectNow(w http.ResponseWriter, status int, reason, msg string, retryIn time.Duration) {
	s.mu.Lock()
	s.end(reason, false)
	s.mu.Unlock()
	if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", retryAfter(retryIn))
	}
	s.nameBackend(w)
	typ := "ServiceUnavailableError"
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		typ = "BadRequestError"
	case http.StatusUnauthorized:
		typ = "AuthenticationError"
	}
	openai.WriteError(w, status, typ, fmt.Sprintf("gateway %s: %s", s.cfg.ID, msg))
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.counts.Accepted++
	started := s.started
	s.mu.Unlock()
	if !started {
		s.rejectNow(w, http.StatusServiceUnavailable, ReasonNotStarted, "still waiting for its engine", time.Second)
		return
	}
	if _, ok := s.admit(w, r, nil, false); !ok {
		return
	}
	chat := r.URL.Path == "/v1/chat/completions"
	maxMessages := openai.DefaultMaxMessages // counted while reading
	if _, ok := openai.ReadFrom(r.Context()); ok {
		maxMessages = 0 // the router in this process counted them
	}
	body, err := openai.ReadBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), maxMessages)
	if err != nil {
		var tooBig *http.MaxBytesError
		var tooMany *openai.TooManyMessagesError
		if errors.As(err, &tooMany) {
			// The rest of the body is never read: the connection cannot
			// carry another request.
			w.Header().Set("Connection", "close")
			s.rejectNow(w, http.StatusBadRequest, ReasonBadRequest, err.Error(), 0)
			return
		}
		if errors.As(err, &tooBig) {
			s.rejectNow(w, http.StatusRequestEntityTooLarge, ReasonBadRequest, fmt.Sprintf("request body is larger than %d bytes", s.cfg.MaxBodyBytes), 0)
			return
		}
		s.rejectNow(w, http.StatusBadRequest, ReasonBadRequest, "reading the request body: "+err.Error(), 0)
		return
	}
	routerName, allowed := s.admit(w, r, body, true)
	if !allowed {
		return
	}
	ctx := r.Context()
	read, ok := openai.ReadFrom(ctx) // the router in this process read it already
	needed := 0                      // prompt plus completion tokens, for a context-length refusal
	if !ok {
		var req openai.Request
		if err := json.Unmarshal(body, &req); err != nil {
			s.rejectNow(w, http.StatusBadRequest, ReasonBadRequest, "request body is not valid JSON: "+err.Error(), 0)
			return
		}
		prompt, lead, _, err := req.PromptTokens(chat)
		if passthrough(r.URL.Path) { // read no further than its model: its tokens estimated from its bytes
			prompt, lead, err = openai.CountTokens(string(body)), r.URL.Path, nil
		}
		if err != nil {
			s.rejectNow(w, http.StatusBadRequest, ReasonBadRequest, err.Error(), 0)
			return
		}
		read = openai.Read{Prompt: prompt, Session: openai.SessionKey(r.Header, req.User, lead)}
		needed = prompt + outputTokens(&req)
	}
	prompt, session := read.Prompt, read.Session
	needed = max(needed, prompt+1)

	now := s.now()
	id, d, wt, wait, err := s.offer(now, routerName, prompt)
	s.pokeStats()
	if d == core.Reject {
		w.Header().Set("Retry-After", retryAfter(wait))
		s.nameBackend(w)
		openai.WriteError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", fmt.Sprintf("gateway %s: %v", s.cfg.ID, err))
		return
	}

	waitCtx, stopWait := s.waitDeadline(ctx)
	defer stopWait()
	if d == core.Queue && !s.await(waitCtx, id, wt) {
		s.abandon(ctx, w, id)
		return
	}
	// Admitted: take a worker permit, preferring the worker the picker chooses.
	queued, err := s.acquire(id, session, wt)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		openai.WriteError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", fmt.Sprintf("gateway %s: %v", s.cfg.ID, err))
		return
	}
	if queued && !s.await(waitCtx, id, wt) {
		s.abandon(ctx, w, id)
		return
	}
	if s.cfg.ObserveQueue != nil {
		s.cfg.ObserveQueue(s.now() - now)
	}
	s.forward(w, r, id, wt.grant, session, prompt, needed, body)
}

// offer hands a request to the admission core under the lock. A rejected
// request is counted and gets no waiter; wait is the queue time to
// advertise in Retry-After.
func (s *Server) offer(now time.Duration, routerName string, prompt int) (id uint64, d core.Decision, wt *waiter, wait time.Duration, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	id = s.nextID
	d, err = s.adm.Offer(now, core.Request{ID: id, Router: s.routerIndex(routerName), PromptTokens: prompt})
	if d == core.Reject {
		wait = s.adm.EstimatedWait()
		s.end(ReasonOverloaded, false)
		return id, d, nil, wait, err
	}
	wt = &waiter{ready: make(chan struct{}, 1), grant: -1}
	s.waits[id] = wt
	return id, d, wt, 0, nil
}

// acquire takes an admitted request's worker permit under the lock,
// preferring the worker the picker chooses; queued says it waits for one.
// On an error the request is released and counted as overloaded.
func (s *Server) acquire(id, session uint64, wt *waiter) (queued bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	prefer := pickWorker(s.now(), session, s.workers, s.slots)
	g, queued, err := s.slots.Acquire(id, prefer)
	if err != nil {
		s.releaseAdmission(id, 0)
		s.end(ReasonOverloaded, false)
		delete(s.waits, id)
		return false, err
	}
	if !queued {
		wt.grant = g.Worker
	}
	return queued, nil
}

// await waits until id is admitted or granted; false if ctx ended first.
func (s *Server) await(ctx context.Context, id uint64, wt *waiter) bool {
	select {
	case <-wt.ready:
		return true
	case <-ctx.Done():
	case <-s.stopped:
	}
	// Cancelled, but a wake-up may have raced the cancellation: the cleanup in
	// fail hands what was granted to the next waiter.
	return false
}

// abandon ends a wait that did not end in a grant: the client went away,
// the gateway is stopping, or the wait outlived MaxQueueWait.
func (s *Server) abandon(ctx context.Context, w http.ResponseWriter, id uint64) {
	select {
	case <-s.stopped:
		s.fail(w, id, ReasonClientCancelled, nil)
		return
	default:
	}
	if ctx.Err() != nil {
		s.fail(w, id, ReasonClientCancelled, nil)
		return
	}
	s.timedOut(w, id)
}

// fail ends a request that never reached the engine: it gives back whatever
// admission or permit it held.
func (s *Server) fail(w http.ResponseWriter, id uint64, reason string, _ error) {
	s.giveBack(id, reason, true)
	s.pokeStats()
	if reason == ReasonShutdown {
		openai.WriteError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "gateway is shutting down")
	}
}

// giveBack cancels a request that never reached the engine: its admission
// or its wait for one, its worker permit or its wait for one; it counts how
// the request ended and returns the queue wait to advertise.
func (s *Server) giveBack(id uint64, reason string, failed bool) (wait time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, admitted := s.adm.Cancel(s.now(), id, nil); admitted != nil {
		s.wakeAdmitted(admitted)
	}
	if grants, err := s.slots.Cancel(id); err == nil {
		s.wakeGrants(grants)
	}
	delete(s.waits, id)
	s.end(reason, failed)
	return s.adm.EstimatedWait()
}

// releaseAdmission frees id's admission slot. Called with mu held.
func (s *Server) releaseAdmission(id uint64, promptTokens int) {
	s.admitBuf = s.adm.Finish(s.now(), id, promptTokens, s.admitBuf[:0])
	s.wakeAdmitted(s.admitBuf)
}

// forward sends the request to its worker's engine and copies the answer back,
// flushing every read so that streamed tokens leave at once.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, id uint64, worker int, session uint64, prompt, needed int, body []byte) {
	s.mu.Lock()
	s.workers[worker].start(id, session, prompt)
	s.adm.AwaitFirstToken(s.now(), id)
	s.mu.Unlock()

	up := &h1.Request{Method: http.MethodPost, Path: r.URL.Path, Body: body, Header: http.Header{"Content-Type": {"application/json"}}}
	s.authorize(up.Header)
	if v := r.Header.Get("X-Session-ID"); v != "" {
		up.Header.Set("X-Session-ID", v)
	}
	eng := s.engineOf(worker)
	if len(s.cfg.Engines) == 1 { // the one engine of all workers is told which
		up.Header.Set(engined.HeaderWorker, strconv.Itoa(worker))
	}
	var status int
	streaming, learn, answered := false, false, false
	flusher, _ := w.(http.Flusher)
	head := func(resp *h1.Response) error {
		status = resp.StatusCode
		for _, k := range []string{"Content-Type", "Cache-Control", "x-should-retry", "Retry-After"} {
			if v := resp.Header.Get(k); v != "" {
				w.Header().Set(k, v)
			}
		}
		s.nameBackend(w)
		w.WriteHeader(status)
		learn = status == http.StatusBadRequest // a context-length refusal names the engine's real limit
		streaming = resp.Header.Get("Content-Type") == "text/event-stream"
		return nil
	}
	copyBody := func(p []byte) error {
		if !answered {
			answered = true
			s.mu.Lock()
			s.adm.FirstToken(id) // the TTFT floor counts it no more
			s.mu.Unlock()
		}
		if learn {
			learn = false
			if ev, ok := core.ParseLimitBody(p); ok {
				s.learnLimit(ev, needed)
			}
		}
		if _, err := w.Write(p); err != nil {
			return errClientGone
		}
		if flusher != nil && (!streaming || !wire.EndsStream(p)) {
			flusher.Flush()
		}
		return nil
	}
	err := s.leg.do(r.Context(), eng, up, head, copyBody)
	var notSent *h1.NotSentError
	switch {
	case err == nil && status >= 500:
		s.finish(id, worker, 0, core.Completed, ReasonEngineStatus)
	case err == nil && status >= 400:
		s.finish(id, worker, 0, core.Completed, ReasonEngineRefused) // the request's fault, not the engine's
	case err == nil:
		s.finish(id, worker, prompt, core.Completed, "")
	case errors.Is(err, errClientGone) || r.Context().Err() != nil:
		s.finish(id, worker, 0, core.Completed, ReasonClientCancelled)
	case status == 0 && errors.As(err, &notSent):
		s.mu.Lock()
		s.engineDown(eng)
		s.mu.Unlock()
		s.finish(id, worker, 0, core.Completed, ReasonEngineUnreachable)
		s.nameBackend(w)
		openai.WriteError(w, http.StatusBadGateway, "APIConnectionError", fmt.Sprintf("gateway %s: engine unreachable: %v", s.cfg.ID, notSent.Err))
	case status == 0:
		s.finish(id, worker, 0, core.Uncertain, ReasonEngineLost)
		s.nameBackend(w)
		openai.WriteError(w, http.StatusBadGateway, "APIConnectionError", fmt.Sprintf("gateway %s: engine connection lost: %v", s.cfg.ID, err))
	default:
		// The engine went away mid-answer: it may still run the request.
		s.finish(id, worker, 0, core.Uncertain, ReasonEngineLost)
		if streaming {
			openai.WriteStreamError(w, fmt.Sprintf("gateway %s: engine connection lost mid-stream: %v", s.cfg.ID, err))
		}
	}
}

// errClientGone is a failed write to the gateway's client.
var errClientGone = errors.New("gateway: the client went away")

// finish ends a request that reached forward: it returns its worker permit
// (quarantining the worker after an uncertain outcome) and its admission slot.
func (s *Server) finish(id uint64, worker, prompt int, o core.Outcome, reason string) {
	s.mu.Lock()
	s.workers[worker].stop(id)
	wasQuarantined := s.slots.Quarantined(worker)
	grants, err := s.slots.Release(id, o)
	if err != nil {
		s.log.Error("releasing a worker permit", "id", id, "err", err)
	}
	if o == core.Uncertain && !wasQuarantined {
		s.quarantined(worker)
	}
	s.wakeGrants(grants)
	s.releaseAdmission(id, prompt)
	delete(s.waits, id)
	if reason != ReasonClientCancelled && reason != ReasonEngineRefused {
		s.errs.Observe(s.now(), reason != "")
	}
	s.end(reason, true)
	s.mu.Unlock()
	s.pokeStats()
}

// learnLimit hands the admission core an engine's context-length refusal
// of a request of needed tokens; a limit it proves (core.LimitLearner's
// rule) goes out with the next stats, due at once, to every router (the
// simulator's gateway runs the same core).
func (s *Server) learnLimit(ev core.LimitEvidence, needed int) {
	s.mu.Lock()
	changed := s.adm != nil && s.adm.LearnLimit(s.now(), ev, needed)
	s.mu.Unlock()
	if changed {
		s.cfg.Logger.Info("engine refused a prompt over its context limit; its reports now carry it", "gateway", s.cfg.ID, "limit", ev.Limit, "needed", needed)
		s.pokeStats()
	}
}

// outputTokens is the completion a request asks for (1 if it names none:
// an engine then fills what the context leaves, at least one token).
func outputTokens(req *openai.Request) int {
	n := 1
	for _, v := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if v != nil && *v > n && *v < 1<<30 {
			n = *v
		}
	}
	return n
}

// engineOf is the index in the config's Engines of the engine that serves
// worker: its own, or the one engine of all workers (which then needs the
// worker named in a header).
func (s *Server) engineOf(worker int) int {
	if len(s.cfg.Engines) > 1 {
		return worker
	}
	return 0
}

// engineURL is where worker's requests go.
func (s *Server) engineURL(worker int) string { return s.cfg.Engines[s.engineOf(worker)] }

// routerIndex maps a router's name to its index in the core's Received
// counts. The name comes from a request header, so the map is bounded: a
// name that is not a valid id (wire.ValidID), or one beyond the first
// core.MaxRouters, counts for none (-1). Called with mu held.
func (s *Server) routerIndex(name string) int {
	i, ok := s.routerIx[name]
	if ok {
		return i
	}
	if !wire.ValidID(name) || len(s.routerIx) >= core.MaxRouters {
		return -1
	}
	i = len(s.routerIx)
	s.routerIx[name] = i
	return i
}

// passthrough reports whether path is a model-bearing POST the gateway
// proxies unchanged without reading its prompt (/v1/responses,
// /v1/embeddings): admitted like a completion, its tokens estimated from
// its bytes.
func passthrough(path string) bool {
	return path != "/v1/chat/completions" && path != "/v1/completions"
}
