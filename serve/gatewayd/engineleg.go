package gatewayd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stargate-llm/stargate/internal/h1"
	"github.com/stargate-llm/stargate/internal/rawio"
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

// EngineTransport names how the gateway reaches its engines.
type EngineTransport string

const (
	// EngineNetHTTP, the default, is net/http: a Transport of its own for
	// the engines (or Config.Transport, when set).
	EngineNetHTTP EngineTransport = "net-http"
	// EngineH1 is package h1's hand-written HTTP/1.1 client over package
	// rawio's socket calls, for plain http:// engines on Linux and other
	// Unix systems: fewer system calls per streamed answer, at the cost of
	// a client the standard library does not maintain.
	EngineH1 EngineTransport = "h1"
)

// EngineTransports lists the engine transports, the default first.
func EngineTransports() []EngineTransport { return []EngineTransport{EngineNetHTTP, EngineH1} }

// String implements pflag.Value; empty is the default, net-http.
func (t *EngineTransport) String() string {
	if *t == "" {
		return string(EngineNetHTTP)
	}
	return string(*t)
}

// Set implements pflag.Value: it takes the known names only.
func (t *EngineTransport) Set(s string) error {
	for _, k := range EngineTransports() {
		if s == string(k) {
			*t = k
			return nil
		}
	}
	return fmt.Errorf("unknown engine transport %q; want %s or %s", s, EngineNetHTTP, EngineH1)
}

// Type implements pflag.Value.
func (t *EngineTransport) Type() string { return "transport" }

// validate reports an unknown engine transport, or h1 where it cannot run.
func (t EngineTransport) validate(engines []string) error {
	switch t {
	case "", EngineNetHTTP:
		return nil
	case EngineH1:
		if !rawio.Supported {
			return errors.New("engine transport h1 needs Linux or another Unix system (package rawio); use net-http")
		}
		for _, e := range engines {
			if _, err := h1.ParseTarget(e); err != nil {
				return fmt.Errorf("engine transport h1 reaches plain http:// engines only (%w); use net-http", err)
			}
		}
		return nil
	}
	return fmt.Errorf("unknown engine transport %q; want %s or %s", string(t), EngineNetHTTP, EngineH1)
}

// Kept engine connections close before uvicorn's (vLLM's, SGLang's) 5 s
// keep-alive would close them under a request; a gateway keeps as many as
// it has requests in flight.
const (
	engineIdleConnTimeout = 4 * time.Second
	engineMaxIdlePerHost  = 1024
)

// newEngineTransport is the net/http transport of the engine leg when the
// Config sets none: no HTTP/2 (engines speak HTTP/1.1), no compression
// (streamed answers are read as they come), and kept connections as
// engineIdleConnTimeout and engineMaxIdlePerHost say.
func newEngineTransport(cfg Config) *http.Transport {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}
	return &http.Transport{DialContext: d.DialContext, DialTLSContext: cfg.DialTLS,
		MaxIdleConns: engineMaxIdlePerHost, MaxIdleConnsPerHost: engineMaxIdlePerHost, IdleConnTimeout: engineIdleConnTimeout,
		DisableCompression: true, ForceAttemptHTTP2: false}
}

// newEngineLeg picks how the gateway reaches its engines: net/http unless
// the Config asks for h1 (Validate has checked that h1 can reach them).
// net/http runs on the Config's Transport when set (the fleet's in-process
// network), else on a transport of its own (newEngineTransport).
func newEngineLeg(cfg Config, client *http.Client) engineLeg {
	if cfg.EngineTransport == EngineH1 {
		l := &h1Leg{client: &h1.Client{IdleTimeout: cfg.UpstreamIdleTimeout, MaxIdlePerHost: engineMaxIdlePerHost, IdleConnTimeout: engineIdleConnTimeout}}
		for _, e := range cfg.Engines {
			t, err := h1.ParseTarget(strings.TrimRight(e, "/"))
			if err == nil { // Validate refused any other
				l.targets = append(l.targets, t)
			}
		}
		return l
	}
	if cfg.Transport == nil {
		client = &http.Client{Transport: newEngineTransport(cfg)}
	}
	viaHTTP := &httpLeg{client: client, idle: cfg.UpstreamIdleTimeout}
	for _, e := range cfg.Engines {
		viaHTTP.bases = append(viaHTTP.bases, strings.TrimRight(e, "/"))
	}
	return viaHTTP
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
			// A write waits on the client (a shut HTTP/2 window, a full
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

// EngineTransport says how this gateway reaches its engines.
func (s *Server) EngineTransport() EngineTransport {
	if _, ok := s.leg.(*h1Leg); ok {
		return EngineH1
	}
	return EngineNetHTTP
}
