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
	if cfg.Transport != nil {
		return viaHTTP
	}
	l := &h1Leg{client: &h1.Client{IdleTimeout: cfg.UpstreamIdleTimeout, MaxIdlePerHost: 1024}}
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
	retry, err := l.once(ctx, engine, req, head, body)
	if retry {
		// As the h1 client does: a kept connection the engine closed (it
		// restarted, say) failed before any byte of the answer, and the
		// others kept are likely closed too. Send on a new one.
		l.client.CloseIdleConnections()
		_, err = l.once(ctx, engine, req, head, body)
	}
	return err
}

// once sends req once; it reports whether a retry is in order: the request
// went on a reused connection that failed before any byte of the answer.
func (l *httpLeg) once(ctx context.Context, engine int, req *h1.Request, head func(*h1.Response) error, body func([]byte) error) (retry bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The transport may itself send again on a new connection: what counts
	// is the last connection's story.
	var sent, reused, answered atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:              func(info httptrace.GotConnInfo) { sent.Store(false); reused.Store(info.Reused) },
		WroteRequest:         func(httptrace.WroteRequestInfo) { sent.Store(true) },
		GotFirstResponseByte: func() { answered.Store(true) },
	})
	up, err := http.NewRequestWithContext(ctx, req.Method, l.bases[engine]+req.Path, bytes.NewReader(req.Body))
	if err != nil {
		return false, &h1.NotSentError{Err: err}
	}
	up.Header = req.Header
	idle := time.AfterFunc(l.idle, func() { cancel(h1.ErrTimeout) })
	defer idle.Stop()
	resp, err := l.client.Do(up)
	if err != nil {
		retry = reused.Load() && !answered.Load() && context.Cause(ctx) == nil
		if !sent.Load() {
			return retry, &h1.NotSentError{Err: lostBecause(ctx, err)}
		}
		return retry, lostBecause(ctx, err)
	}
	defer resp.Body.Close()
	if err := head(&h1.Response{StatusCode: resp.StatusCode, Header: resp.Header}); err != nil {
		return false, err
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
				return false, err
			}
		}
		switch {
		case errors.Is(rerr, io.EOF):
			return false, nil
		case rerr != nil:
			return false, lostBecause(ctx, rerr)
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
