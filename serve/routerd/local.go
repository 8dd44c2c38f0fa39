package routerd

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"sync"

	"github.com/stargate-llm/stargate/internal/netsim"
	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/serve/wire"
)

// Local is a gateway in the router's own process (stargate router
// --gateway-engine). The router serves a request placed on it by calling
// the gateway's handler in the request's own goroutine: no connection, no
// HTTP/2 frames and no hand-off between goroutines for each token, so the
// engine's bytes go from the gateway's read straight to the client's socket.
//
// After Close, requests for it are refused the way a closed port refuses a
// dial: the router fails the backend and tries another. A request on a path
// with an operator's injected fault (SetPath) goes over the network, which
// is where the fault is applied.
type Local struct {
	mu sync.Mutex
	// url is the backend URL the gateway registers with; host its host.
	url, host string
	handler   http.Handler // nil before Open and after Close
	active    sync.WaitGroup
}

// Open starts serving the requests for gatewayURL, the URL the gateway
// registers with, with its handler.
func (l *Local) Open(gatewayURL string, h http.Handler) error {
	u, err := url.Parse(gatewayURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("router: in-process gateway URL %q: want http[s]://HOST[:PORT]", gatewayURL)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.url, l.host, l.handler = backendURL(gatewayURL), u.Host, h
	return nil
}

// Close refuses new requests and waits for those in flight to end, or for
// ctx to end.
func (l *Local) Close(ctx context.Context) error {
	func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.handler = nil
	}()
	done := make(chan struct{})
	go func() {
		l.active.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("router: in-process gateway: requests still in flight: %w", ctx.Err())
	}
}

// enter says how a request reaches backendURL: over the network (ok
// false), or by the gateway's handler h, nil while the gateway is closed. A
// non-nil h must be followed by l.active.Done().
func (l *Local) enter(backendURL string, paths *netsim.Transport) (h http.Handler, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.url == "" || backendURL != l.url {
		return nil, false
	}
	if p := paths.Path(l.host); p.OneWay > 0 || p.Jitter > 0 {
		return nil, false
	}
	if l.handler != nil {
		l.active.Add(1)
	}
	return l.handler, true
}

// attemptLocal is attempt for the in-process gateway. Its answer is written
// through localResponse: one that may be a refusal another backend can take
// is held back, as attempt reads it before writing anything, and everything
// else goes to the client as the gateway writes it, flushed when the gateway
// flushes.
func (s *Server) attemptLocal(ctx context.Context, w http.ResponseWriter, up *http.Request, h http.Handler, b target, stream bool, q want) (res *attemptResult) {
	if h == nil {
		return &attemptResult{neverSent: true, msg: fmt.Sprintf("backend %s: the in-process gateway is closed", b.name)}
	}
	defer s.cfg.Local.active.Done()
	lr := &localResponse{client: w, header: http.Header{}, backend: b.name, stream: stream}
	lr.flusher, _ = w.(http.Flusher)
	defer func() {
		// A gateway bug must not take the router's accounting with it:
		// the request ends, as when a gateway process dies mid-answer.
		if p := recover(); p != nil {
			s.log.Error("in-process gateway panicked", "backend", b.name, "panic", p, "stack", string(debug.Stack()))
			msg := fmt.Sprintf("router: backend %s failed: in-process gateway panicked", b.name)
			status := lr.status
			switch {
			case !lr.committed():
				status = http.StatusBadGateway
				openai.WriteError(w, status, "APIConnectionError", msg)
			case lr.sse:
				openai.WriteStreamError(w, msg)
			}
			res = &attemptResult{status: status, limit: -1, done: true, reason: ReasonBackendLost}
		}
	}()
	h.ServeHTTP(lr, up)
	if lr.status == 0 { // nothing written: an empty 200, as net/http sends
		lr.WriteHeader(http.StatusOK)
	}
	if lr.held {
		if res := s.refusal(b, lr.status, lr.header.Get("Retry-After"), lr.body, q); res != nil {
			return res
		}
		lr.commit()
		if _, err := w.Write(lr.body); err != nil {
			lr.clientErr = err
		}
	}
	res = &attemptResult{status: lr.status, limit: -1}
	switch {
	case lr.clientErr != nil:
		return res.end(ReasonClientCancelled)
	case lr.status >= 400:
		return res.end(ReasonBackendStatus)
	case lr.sawError:
		return res.end(ReasonBackendLost)
	case ctx.Err() != nil && !lr.ended:
		// The client went away and the gateway stopped short of the end.
		return res.end(ReasonClientCancelled)
	}
	return res.end("")
}

// localResponse is the http.ResponseWriter the in-process gateway writes its
// answer to (see attemptLocal).
type localResponse struct {
	client  http.ResponseWriter
	flusher http.Flusher
	header  http.Header
	backend string
	stream  bool // the client asked for a stream

	status int
	// sse: the committed answer is a stream the client asked for.
	sse bool
	// held: an answer that may be a refusal another backend can take
	// (mayRefuse); body keeps its start.
	held bool
	body []byte
	// sawError: an SSE error event went by; ended: the last write ended
	// the stream; clientErr: a write to the client failed.
	sawError, ended bool
	clientErr       error
}

func (lr *localResponse) Header() http.Header { return lr.header }

func (lr *localResponse) WriteHeader(code int) {
	if lr.status != 0 {
		return
	}
	lr.status = code
	if lr.held = mayRefuse(code); !lr.held {
		lr.commit()
	}
}

// commit sends the client the answer's status and the headers attempt
// passes on.
func (lr *localResponse) commit() {
	lr.held = false
	for _, k := range forwardedHeaders {
		if v := lr.header.Get(k); v != "" {
			lr.client.Header().Set(k, v)
		}
	}
	lr.client.Header().Set(wire.HeaderBackend, lr.backend)
	lr.sse = lr.stream && lr.header.Get("Content-Type") == "text/event-stream"
	lr.client.WriteHeader(lr.status)
}

func (lr *localResponse) committed() bool { return lr.status != 0 && !lr.held }

func (lr *localResponse) Write(p []byte) (int, error) {
	if lr.status == 0 {
		lr.WriteHeader(http.StatusOK)
	}
	if lr.held {
		lr.body = append(lr.body, p[:min(len(p), maxHeldBody-len(lr.body))]...)
		return len(p), nil
	}
	if lr.clientErr != nil {
		return 0, lr.clientErr
	}
	if lr.sse {
		lr.sawError = lr.sawError || bytes.Contains(p, sseError)
		lr.ended = wire.EndsStream(p)
	}
	n, err := lr.client.Write(p)
	if err != nil {
		lr.clientErr = err
	}
	return n, err
}

// Flush passes the gateway's flushes on: it flushes after every read from
// the engine but the one that ends a stream, as attempt does.
func (lr *localResponse) Flush() {
	if lr.status == 0 {
		lr.WriteHeader(http.StatusOK)
	}
	if lr.held || lr.flusher == nil || lr.clientErr != nil {
		return
	}
	lr.flusher.Flush()
}
