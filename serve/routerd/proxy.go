package routerd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/policy"
	rcore "github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/serve/wire"
)

// Reasons a request ends other than completed.
const (
	ReasonUnauthorized    = "unauthorized"
	ReasonBadRequest      = "bad_request"
	ReasonNoBackend       = "no_backend"
	ReasonTooLong         = "context_too_long"
	ReasonPolicy          = "policy"
	ReasonOverloaded      = "backends_overloaded"
	ReasonClientCancelled = "client_cancelled"
	ReasonBackendLost     = "backend_lost_mid_stream"
	ReasonBackendStatus   = "backend_status"
	ReasonUnreachable     = "backends_unreachable"
	// ReasonEngineUnreachable: the backends' gateways answered 502 or 504:
	// their engines did not answer (not overload).
	ReasonEngineUnreachable = "engine_unreachable"
	// ReasonBackendError: the connection broke before an answer.
	ReasonBackendError = "backend_error"
	// Reasons of a backend's final 4xx answer, the request's own fault and
	// no backend failure: a 404 (an unknown model or path), a 401 or 403
	// (the engine refused the credentials), any other 4xx.
	ReasonNotFound    = "not_found"
	ReasonEngineAuth  = "engine_auth"
	ReasonClientError = "client_error"
	// ReasonUnknownModel: no backend serves the request's model (a 404
	// from the router; no backend was tried).
	ReasonUnknownModel = "model_not_found"
)

// accounting is how the router's requests ended (see wire.Counts), with its
// attempts and retries.
type accounting struct {
	wire.Counts
	Attempts uint64
	Retries  uint64
}

// Counts is a copy of the router's accounting.
type Counts = accounting

// Counts returns how the router's requests ended so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counts
	c.Counts = s.counts.Clone()
	return c
}

func (s *Server) end(reason string, failed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.End(reason, failed)
}

// reject answers a request the router refuses.
func (s *Server) reject(w http.ResponseWriter, status int, reason, msg string) {
	s.end(reason, false)
	typ := "BadRequestError"
	switch status {
	case http.StatusUnauthorized:
		typ = "AuthenticationError"
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		typ = "RateLimitError"
		w.Header().Set("Retry-After", "1")
	}
	openai.WriteError(w, status, typ, "router: "+msg)
}

// hopHeaders are never forwarded (RFC 9110 section 7.6.1), with the client's
// credentials.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Authorization", "Cookie"}

func (s *Server) accept() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Accepted++
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request) {
	s.accept()
	if s.cfg.APIKeys != nil && !s.cfg.APIKeys.Allowed(r) {
		s.reject(w, http.StatusUnauthorized, ReasonUnauthorized, "missing or unknown API key; send Authorization: Bearer KEY")
		return
	}
	body, err := openai.ReadBody(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes), s.cfg.MaxMessages)
	if err != nil {
		var tooBig *http.MaxBytesError
		var tooMany *openai.TooManyMessagesError
		if errors.As(err, &tooMany) {
			// The rest of the body is never read: the connection cannot
			// carry another request.
			w.Header().Set("Connection", "close")
			s.reject(w, http.StatusBadRequest, ReasonBadRequest, err.Error())
			return
		}
		if errors.As(err, &tooBig) {
			s.reject(w, http.StatusRequestEntityTooLarge, ReasonBadRequest, fmt.Sprintf("request body is larger than %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		s.reject(w, http.StatusBadRequest, ReasonBadRequest, "reading the request body: "+err.Error())
		return
	}
	var req openai.Request
	if err := json.Unmarshal(body, &req); err != nil {
		s.reject(w, http.StatusBadRequest, ReasonBadRequest, "request body is not valid JSON: "+err.Error())
		return
	}
	chat := r.URL.Path == "/v1/chat/completions"
	if len(req.Messages) > s.cfg.MaxMessages {
		s.reject(w, http.StatusBadRequest, ReasonBadRequest, fmt.Sprintf("%d messages; at most %d", len(req.Messages), s.cfg.MaxMessages))
		return
	}
	for _, v := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if v != nil && (*v < 1 || *v > s.cfg.MaxTokensLimit) {
			s.reject(w, http.StatusBadRequest, ReasonBadRequest, fmt.Sprintf("max_tokens %d is outside 1-%d", *v, s.cfg.MaxTokensLimit))
			return
		}
	}
	prompt, lead, rendered, err := req.PromptTokens(chat)
	if err != nil {
		s.reject(w, http.StatusBadRequest, ReasonBadRequest, err.Error())
		return
	}
	session := openai.SessionKey(r.Header, req.User, lead)
	tokens := prompt
	for _, v := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if v != nil {
			tokens = prompt + *v
		}
	}
	s.route(w, r, body, want{session: session, prompt: prompt, tokens: tokens, model: req.Model, blocks: s.promptBlocks(rendered)}, req.Stream)
}

// table is the router's backends as one immutable snapshot (see
// Server.table): what a request needs of them, by stable ID.
type table struct {
	list []target // in the core's order
	byID map[rcore.BackendID]target
}

// target is a backend as a snapshot holds it.
type target struct {
	id          rcore.BackendID
	name, url   string
	static      bool
	maxModelLen int
	models      []string
}

// want is what placing a request needs of it: its session, its estimated
// prompt and total tokens, and its model.
type want struct {
	session        uint64
	prompt, tokens int
	model          string
	blocks         []uint64 // the prompt's block hashes (promptBlocks), for the prefix policy
}

// tooShortFor lists the backends of model's pool whose context is shorter
// than prompt tokens by the router's estimate; none if that is every
// backend of the pool: the estimate only orders candidates, and the
// engine's own count decides (its 400 is final).
func (t *table) tooShortFor(model string, prompt int) []rcore.BackendID {
	pool := 0
	var out []rcore.BackendID
	for _, b := range t.list {
		if !rcore.Serves(b.models, model) {
			continue
		}
		pool++
		if b.maxModelLen > 0 && prompt >= b.maxModelLen {
			out = append(out, b.id)
		}
	}
	if len(out) == pool {
		return nil
	}
	return out
}

// knows reports whether a backend serves model (rcore.Serves), and lists
// the models the backends name.
func (t *table) knows(model string) (bool, []string) {
	var names []string
	for _, b := range t.list {
		if rcore.Serves(b.models, model) {
			return true, nil
		}
		names = append(names, b.models...)
	}
	slices.Sort(names)
	return false, slices.Compact(names)
}

// route places the request and proxies it, retrying before the first byte on
// backends not yet tried. It holds no lock across a step and keeps no
// position: backends are named by ID, and a backend that left meanwhile is
// simply not found.
func (s *Server) route(w http.ResponseWriter, r *http.Request, body []byte, q want, stream bool) {
	session, prompt, tokens := q.session, q.prompt, q.tokens
	arrived := time.Now()
	ctx := r.Context()
	ctx = withBlocks(ctx, q.blocks)
	if s.cfg.Local != nil { // an in-process gateway need not read the body again
		ctx = openai.WithRead(ctx, openai.Read{Prompt: prompt, Session: session})
	}
	tbl := s.table.Load()
	if len(tbl.list) == 0 {
		s.reject(w, http.StatusServiceUnavailable, ReasonNoBackend, "no backend has registered yet")
		return
	}
	if ok, known := tbl.knows(q.model); !ok {
		s.end(ReasonUnknownModel, false)
		openai.WriteError(w, http.StatusNotFound, "NotFoundError",
			fmt.Sprintf("router: the model %q does not exist; this router serves: %s", q.model, strings.Join(known, ", ")))
		return
	}
	skip := tbl.tooShortFor(q.model, prompt)
	id := s.requestID()
	retry := rcore.NewRetry(s.cfg.MaxAttempts, skip)
	var last *attemptResult
	pool := s.pickPool(tokens, q.model)
	for again := true; again; {
		d, b, ok := s.decide(ctx, id, rcore.Ask{Session: session, Tokens: tokens, Exclude: retry.Exclude(), Again: retry.Tried() > 0, Model: q.model, Pool: pool})
		if !ok {
			s.end(ReasonClientCancelled, true)
			return
		}
		if d.Kind == policy.Reject {
			if last != nil {
				break
			}
			s.reject(w, http.StatusTooManyRequests, ReasonPolicy, "no backend can take the request now: "+d.Reason)
			return
		}
		if !retry.Accept(d) {
			// Every backend has refused it: never retry on one already tried.
			s.undispatch(b)
			break
		}
		s.counted(retry.Tried())
		if b.url == "" {
			// The backend left between the pick and now: nothing was sent.
			last = &attemptResult{neverSent: true, msg: fmt.Sprintf("backend %d left the router", d.Backend)}
			again = retry.Refused(d.Backend, rcore.Refusal{Kind: rcore.Errored}).Again
			continue
		}
		if h := s.cfg.Hooks.Dispatch; h != nil {
			h(DispatchEvent{At: time.Now(), Router: s.cfg.ID, Backend: b.name, Session: session, Tokens: tokens})
		}
		tw := &timingWriter{ResponseWriter: w}
		model := s.met.lat.model(tbl, q.model)
		if stream {
			tw.itl = s.met.lat.itl.WithLabelValues(b.name, model)
		}
		res := s.attempt(ctx, tw, r, b, body, stream, q)
		if res.done {
			s.met.lat.observe(tw, arrived, b.name, model)
			s.report(b, res, tokens)
			s.settleStatic(b)
			s.end(res.outcome())
			return
		}
		last = res
		step := retry.Refused(b.id, res.refusal())
		if step.Report {
			s.report(b, res, tokens)
		}
		s.settleStatic(b)
		if step.Undispatch || step.Disable {
			// The connection was refused: the request never arrived, and the
			// backend is down until its stats say otherwise.
			s.refusedConnection(b, step)
		}
		again = step.Again
		if ctx.Err() != nil {
			s.end(ReasonClientCancelled, true)
			return
		}
	}
	// Every attempt was refused before its first byte.
	if last == nil {
		s.reject(w, http.StatusServiceUnavailable, ReasonOverloaded, "no backend could take the request")
		return
	}
	if last.status == http.StatusBadRequest { // every backend that fits by its stats refused it as too long
		s.reject(w, http.StatusBadRequest, ReasonTooLong, last.msg)
		return
	}
	s.end(last.refusedReason(), false)
	if last.retryAfter != "" {
		w.Header().Set("Retry-After", last.retryAfter)
	} else {
		w.Header().Set("Retry-After", "1")
	}
	openai.WriteError(w, http.StatusServiceUnavailable, "ServiceUnavailableError",
		fmt.Sprintf("router: %d backends refused the request before answering; last: %s", refused(retry.Exclude()), last.msg))
}

// requestID numbers a request for the core's wait queue.
func (s *Server) requestID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return s.nextID
}

// counted counts an attempt, and a retry after the first (attempt is the
// number of attempts before it).
func (s *Server) counted(attempt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts.Attempts++
	if attempt > 0 {
		s.counts.Retries++
	}
}

// undispatch takes back a dispatch to b that was never sent.
func (s *Server) undispatch(b target) {
	func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.core.Undispatch(b.id)
	}()
	s.settleStatic(b)
}

// refusedConnection carries out the retry rule's step for a refused
// connection: it takes back the dispatch, and keeps the backend (unless
// static) from new requests until its next stats message.
func (s *Server) refusedConnection(b target, step rcore.Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if step.Undispatch {
		s.core.Undispatch(b.id)
	}
	if bk, ok := s.backends[b.id]; ok && step.Disable && !bk.static && s.core.Refused(b.id) {
		s.log.Warn("backend failed: connection refused", "backend", b.name)
	}
}

// refused counts the distinct backends in exclude.
func refused(exclude []rcore.BackendID) int {
	seen := map[rcore.BackendID]bool{}
	for _, b := range exclude {
		seen[b] = true
	}
	return len(seen)
}

// decide asks the core, waiting if the policy says so; ok is false if the
// client went away first. On Dispatch, b is the backend as the latest
// snapshot holds it (its url empty if it has left since).
func (s *Server) decide(ctx context.Context, id uint64, q rcore.Ask) (d rcore.Decision, b target, ok bool) {
	q.Blocks, q.BlockTokens = blocksOf(ctx)
	d, ch := s.place(id, q)
	if ch != nil {
		select {
		case d = <-ch:
		case <-ctx.Done():
			s.cancel(id)
			return d, target{}, false
		}
	}
	if d.Kind != policy.Dispatch {
		return d, target{}, true
	}
	return d, s.claim(d.Backend), true
}

// place asks the core; on Wait, ch will carry the decision.
func (s *Server) place(id uint64, q rcore.Ask) (rcore.Decision, chan rcore.Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.core == nil {
		return rcore.Decision{Kind: policy.Reject, Backend: rcore.NoBackend, Reason: "no backend"}, nil
	}
	d := s.core.Route(s.now(), id, q)
	if d.Kind != policy.Wait {
		return d, nil
	}
	ch := make(chan rcore.Decision, 1)
	s.waits[id] = &waitEntry{ch: ch}
	signal(s.timerSet)
	return d, ch
}

// cancel forgets a waiting request whose client went away.
func (s *Server) cancel(id uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.core.Cancel(id)
	delete(s.waits, id)
}

// claim resolves a dispatch's backend by ID in the latest snapshot and, for
// a static backend, counts the attempt as in flight.
func (s *Server) claim(id rcore.BackendID) target {
	t := s.table.Load().byID[id]
	t.id = id
	if !t.static {
		return t
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.backends[id]; ok {
		b.inflight++
		b.last.Received++
	}
	return t
}

// settleStatic ends an attempt at a static backend. No gateway reports such
// a backend's load, so the router reports it to its core itself, as stats
// that count every dispatch so far as received and the attempts still open
// as active; without them each dispatch would stay pending for good and the
// backend would look full after capacity requests in all.
func (s *Server) settleStatic(t target) {
	if !t.static {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.backends[t.id]
	if !ok {
		return
	}
	b.inflight = max(b.inflight-1, 0)
	b.last.Seq++
	b.last.Active = b.inflight
	s.outBuf = s.core.OnStats(s.now(), s.coreStats(t.id, &b.last), s.outBuf[:0])
	s.deliver(s.outBuf)
}

// attemptResult says how one attempt went. done means the client has its
// answer (reason "" if it completed); otherwise the request may try another
// backend.
type attemptResult struct {
	done       bool
	reason     string
	neverSent  bool
	retryAfter string
	msg        string
	// status is the backend's answer (0 if none); limit the context length
	// a context-length refusal named.
	status int
	limit  int
}

// report tells the router core how an attempt ended: errors, overload and
// context-length refusals are separate signals.
func (s *Server) report(b target, res *attemptResult, tokens int) {
	var r rcore.Result
	switch {
	case res.status == http.StatusBadRequest && res.limit >= 0 && !res.done:
		r = rcore.Result{Kind: rcore.TooLong, Tokens: tokens, Limit: res.limit}
	case res.done && (res.reason == "" || res.reason == ReasonClientCancelled):
		r = rcore.Result{Kind: rcore.Succeeded}
	case res.status == http.StatusServiceUnavailable || res.status == http.StatusTooManyRequests:
		r = rcore.Result{Kind: rcore.Overloaded}
	case res.done && res.status > 0 && res.status < 500:
		return // the request's own fault (a 4xx): says nothing of the backend
	default:
		r = rcore.Result{Kind: rcore.Errored}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.core.OnResult(s.now(), b.id, r)
}

func (s *Server) attempt(ctx context.Context, w http.ResponseWriter, r *http.Request, b target, body []byte, stream bool, q want) *attemptResult {
	up, err := s.upstream(ctx, r, b, body)
	if err != nil {
		return &attemptResult{neverSent: true, msg: err.Error()}
	}
	if l := s.cfg.Local; l != nil {
		if h, ok := l.enter(b.url, s.paths); ok {
			return s.attemptLocal(ctx, w, up, h, b, stream, q)
		}
	}
	resp, err := s.client.Do(up)
	if err != nil {
		var op *net.OpError
		refused := errors.As(err, &op) && op.Op == "dial"
		return &attemptResult{neverSent: refused, msg: fmt.Sprintf("backend %s: %v", b.name, err)}
	}
	defer resp.Body.Close()
	if mayRefuse(resp.StatusCode) {
		head, _ := io.ReadAll(io.LimitReader(resp.Body, maxHeldBody))
		if res := s.refusal(b, resp.StatusCode, resp.Header.Get("Retry-After"), head, q); res != nil {
			return res
		}
		resp.Body = io.NopCloser(bytes.NewReader(head))
	}
	for _, k := range forwardedHeaders {
		if v := resp.Header.Get(k); v != "" {
			w.Header().Set(k, v)
		}
	}
	w.Header().Set(wire.HeaderBackend, b.name)
	// The header leaves with the first body bytes, which are flushed at once:
	// a flush of its own would cost every request one more write.
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	res := attemptResult{status: resp.StatusCode, limit: -1}
	bp := wire.GetCopyBuffer()
	defer wire.PutCopyBuffer(bp)
	buf := *bp
	streaming := stream && resp.Header.Get("Content-Type") == "text/event-stream"
	sawError := false
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			sawError = sawError || (streaming && bytes.Contains(buf[:n], sseError))
			if _, werr := w.Write(buf[:n]); werr != nil {
				return res.end(ReasonClientCancelled)
			}
			if flusher != nil && (!streaming || !wire.EndsStream(buf[:n])) {
				flusher.Flush()
			}
		}
		if rerr == nil {
			continue
		}
		switch {
		case errors.Is(rerr, io.EOF):
			if resp.StatusCode >= 400 {
				return res.end(ReasonBackendStatus)
			}
			if sawError { // the backend ended the stream with an error event
				return res.end(ReasonBackendLost)
			}
			return res.end("")
		case ctx.Err() != nil:
			return res.end(ReasonClientCancelled)
		default:
			if streaming {
				openai.WriteStreamError(w, fmt.Sprintf("router: backend %s failed mid-stream: %v", b.name, rerr))
			}
			return res.end(ReasonBackendLost)
		}
	}
}

// mayRefuse reports whether an answer of status may be a refusal another
// backend can take, which an attempt reads before it writes anything: 503,
// 429 and 502 always are, a 400 when it names a context limit (refusal).
func mayRefuse(status int) bool {
	switch status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusBadRequest:
		return true
	}
	return false
}

// maxHeldBody bounds what an attempt reads of an answer before deciding
// whether it is a refusal, and maxRefusal what its message keeps of it.
const maxHeldBody, maxRefusal = 8192, 2048

// refusal is the result of an attempt whose answer (status, Retry-After
// and the start of the body) another backend may take instead, or nil when
// the client gets it: a 400 that is not a context-length refusal, or one
// that no other backend fits. A context-length refusal teaches the router
// the backend's limit.
func (s *Server) refusal(b target, status int, retryAfter string, head []byte, q want) *attemptResult {
	msg := bytes.TrimSpace(head)
	if status != http.StatusBadRequest {
		return &attemptResult{status: status, retryAfter: retryAfter,
			msg: fmt.Sprintf("backend %s: %d %s: %s", b.name, status, http.StatusText(status), msg[:min(len(msg), maxRefusal)])}
	}
	if limit := openai.ContextLimit(msg); limit >= 0 && s.anotherFits(b, q) {
		return &attemptResult{status: status, limit: limit, msg: fmt.Sprintf("backend %s: %s", b.name, msg)}
	}
	return nil
}

// upstream is the request attempt sends backend b: the client's headers but
// hop-by-hop ones, its credentials and any X-Stargate- header, and the
// router's name.
func (s *Server) upstream(ctx context.Context, r *http.Request, b target, body []byte) (*http.Request, error) {
	up, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+r.URL.Path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		up.Header[k] = vs
	}
	for _, k := range hopHeaders {
		up.Header.Del(k)
	}
	for k := range up.Header {
		if len(k) >= len(wire.HeaderPrefix) && http.CanonicalHeaderKey(k[:len(wire.HeaderPrefix)]) == wire.HeaderPrefix {
			up.Header.Del(k)
		}
	}
	up.Header.Set(wire.HeaderRouter, s.cfg.ID)
	up.ContentLength = int64(len(body))
	s.signUpstream(up, body, b.name)
	return up, nil
}

// forwardedHeaders are the backend's answer headers the client gets.
var forwardedHeaders = []string{"Content-Type", "Cache-Control", "x-should-retry", "Retry-After"}

// refusal is how an attempt that the client did not get was refused, for
// the retry rule: a refused connection, an overload answer, a
// context-length refusal (which the gateway counted, and which another
// backend fits, or the client would have got it) or an error.
func (r *attemptResult) refusal() rcore.Refusal {
	switch {
	case r.status == http.StatusBadRequest && r.limit >= 0:
		return rcore.Refusal{Kind: rcore.TooLong, OthersFit: true}
	case r.status == http.StatusServiceUnavailable || r.status == http.StatusTooManyRequests:
		return rcore.Refusal{Kind: rcore.Overloaded}
	}
	return rcore.Refusal{Kind: rcore.Errored, NeverSent: r.neverSent}
}

func (r attemptResult) end(reason string) *attemptResult {
	r.done, r.reason = true, reason
	return &r
}

// anotherFits reports whether a backend other than b may take a request of
// tokens, by the limits the router core knows (the simulator asks the same).
func (s *Server) anotherFits(b target, q want) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.core.OthersFitModel(b.id, q.tokens, q.model) // b gone: any backend is another
}

// sseError starts an in-stream error event.
var sseError = []byte(`data: {"error"`)

// outcome is how a request the client got an answer for ended: its reason,
// and whether that is a failure. A backend's final 4xx answer is the
// request's own fault (a bad model name, a prompt the engine refuses), so a
// rejection labelled by what it was, never a backend failure; a 5xx is.
func (r *attemptResult) outcome() (reason string, failed bool) {
	if r.reason != ReasonBackendStatus || r.status < 400 || r.status >= 500 {
		return r.reason, r.reason != ""
	}
	switch r.status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return ReasonBadRequest, false
	case http.StatusNotFound:
		return ReasonNotFound, false
	case http.StatusUnauthorized, http.StatusForbidden:
		return ReasonEngineAuth, false
	}
	return ReasonClientError, false
}

// refusedReason says why the last attempt of a request every backend
// refused before its first byte was refused: unreachable gateways, engines
// their gateways could not reach (502, 504), a connection that broke, or
// overload (429, 503).
func (r *attemptResult) refusedReason() string {
	switch {
	case r.neverSent:
		return ReasonUnreachable
	case r.status == http.StatusBadGateway || r.status == http.StatusGatewayTimeout:
		return ReasonEngineUnreachable
	case r.status == 0:
		return ReasonBackendError
	}
	return ReasonOverloaded
}
