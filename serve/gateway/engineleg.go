package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stargate-llm/stargate/serve/h1"
	"github.com/stargate-llm/stargate/serve/rawio"
	"github.com/stargate-llm/stargate/serve/wire"
)

// engineLeg sends one request to an engine and streams its answer back:
// head gets the answer's status and fields, then body each piece of the
// body as it arrives. An error from head or body comes back unchanged; a
// failure before the request was written whole is an *h1.NotSentError; no
// byte from the engine for the idle timeout is h1.ErrTimeout.
type engineLeg interface {
	do(ctx context.Context, engine int, req *h1.Request, head func(*h1.Response) error, body func([]byte) error) error
	// closeIdle closes the connections kept for later requests.
	closeIdle()
}

// newEngineLeg picks how the gateway reaches its engines: the h1 client,
// which reads streamed answers with fewer system calls, for plain http://
// engines on the default transport; net/http otherwise (https engines, or a
// transport the caller set, such as the fleet's simulated network paths).
func newEngineLeg(cfg Config, client *http.Client) engineLeg {
	viaHTTP := &httpLeg{client: client, idle: cfg.UpstreamIdleTimeout}
	for _, e := range cfg.Engines {
		viaHTTP.bases = append(viaHTTP.bases, strings.TrimRight(e, "/"))
	}
	if cfg.Transport != nil || !rawio.Supported {
		return viaHTTP
	}
	// Kept connections go before uvicorn's (vLLM's, SGLang's) 5 s keep-alive
	// would close them.
	l := &h1Leg{client: &h1.Client{IdleTimeout: cfg.UpstreamIdleTimeout, MaxIdlePerHost: 1024, IdleConnTimeout: 4 * time.Second}}
	for _, e := range viaHTTP.bases {
		t, err := h1.ParseTarget(e)
		if err != nil {
			return viaHTTP
		}
		l.targets = append(l.targets, t)
	}
	return l
}

// h1Leg reaches plain-http engines with the h1 client.
type h1Leg struct {
	targets []h1.Target // by engine, as configured
	client  *h1.Client
}

func (l *h1Leg) do(ctx context.Context, engine int, req *h1.Request, head func(*h1.Response) error, body func([]byte) error) error {
	return l.client.Do(ctx, l.targets[engine], req, head, body)
}

func (l *h1Leg) closeIdle() { l.client.CloseIdleConnections() }

// httpLeg reaches engines with net/http.
type httpLeg struct {
	client *http.Client
	bases  []string // by engine, without a trailing slash
	idle   time.Duration
}

func (l *httpLeg) closeIdle() { l.client.CloseIdleConnections() }

func (l *httpLeg) do(ctx context.Context, engine int, req *h1.Request, head func(*h1.Response) error, body func([]byte) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The transport may itself send again on a new connection: what counts
	// is the last connection's story.
	var sent atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { sent.Store(false) },
		WroteRequest: func(info httptrace.WroteRequestInfo) { sent.Store(info.Err == nil) },
	})
	up, err := http.NewRequestWithContext(ctx, req.Method, l.bases[engine]+req.Path, bytes.NewReader(req.Body))
	if err != nil {
		return &h1.NotSentError{Err: err}
	}
	up.Header = req.Header
	idle := time.AfterFunc(l.idle, func() { cancel(h1.ErrTimeout) })
	defer idle.Stop()
	resp, err := l.client.Do(up)
	if err != nil {
		if !sent.Load() {
			return &h1.NotSentError{Err: lostBecause(ctx, err)}
		}
		return lostBecause(ctx, err)
	}
	defer resp.Body.Close()
	if err := head(&h1.Response{StatusCode: resp.StatusCode, Header: resp.Header}); err != nil {
		return err
	}
	bp := wire.GetCopyBuffer()
	defer wire.PutCopyBuffer(bp)
	buf := *bp
	for {
		idle.Reset(l.idle)
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			// A write waits on the client (a shut link window, a full
			// socket): not the engine's silence, so not on its clock.
			idle.Stop()
			if err := body(buf[:n]); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(rerr, io.EOF):
			return nil
		case rerr != nil:
			return lostBecause(ctx, rerr)
		}
	}
}

// lostBecause says why the engine connection was lost: the idle timeout
// (the request's context's cause) or the connection's own error.
func lostBecause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		return cause
	}
	return err
}
