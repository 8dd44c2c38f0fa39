package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

// The HTTP/2 settings of routers' connections to the gateway.
const (
	// h2MaxStreams caps the streams one connection carries at once; a
	// router with more in flight opens another connection.
	h2MaxStreams = 1000
	// A connection silent for h2ReadIdle is pinged; one whose ping is not
	// answered within h2PingTimeout is closed, failing its streams (a
	// router gone without closing its connections).
	h2ReadIdle    = 30 * time.Second
	h2PingTimeout = 15 * time.Second
	// h2IdleTimeout closes a connection that carried no stream for that long.
	h2IdleTimeout = 5 * time.Minute
)

// h2cPreface is what is left of HTTP/2's client preface after net/http has
// read its first lines ("PRI * HTTP/2.0\r\n\r\n") as a request.
const h2cPreface = "SM\r\n\r\n"

// h2cServer serves routers' unencrypted HTTP/2 connections (h2c, with prior
// knowledge: RFC 9113, section 3.3) with the gateway's API handler, on the
// same port as HTTP/1.1. net/http hands it each connection that starts with
// HTTP/2's preface as a "PRI *" request; it takes the connection over and
// serves it with golang.org/x/net/http2. (Over TLS, net/http serves HTTP/2
// itself when the listener's ALPN offers h2.) It tracks the connections it
// took over, which the http.Server no longer does, so that they drain on
// Shutdown and close on Close.
type h2cServer struct {
	h2      *http2.Server
	base    *http.Server // its Shutdown sends every connection GOAWAY
	handler http.Handler
	log     *slog.Logger

	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closing bool
	serving sync.WaitGroup
}

func newH2CServer(h http.Handler, log *slog.Logger) *h2cServer {
	s := &h2cServer{h2: &http2.Server{MaxConcurrentStreams: h2MaxStreams, ReadIdleTimeout: h2ReadIdle, PingTimeout: h2PingTimeout,
		IdleTimeout: h2IdleTimeout}, base: &http.Server{}, handler: h, log: log, conns: make(map[net.Conn]struct{})}
	// ConfigureServer ties h2's graceful shutdown to base's Shutdown.
	if err := http2.ConfigureServer(s.base, s.h2); err != nil {
		log.Warn("HTTP/2 graceful shutdown unavailable", "err", err)
	}
	return s
}

// isH2CPreface says whether r is the first line of HTTP/2's client preface.
func isH2CPreface(r *http.Request) bool {
	return r.Method == "PRI" && r.RequestURI == "*" && r.ProtoMajor == 2 && r.ProtoMinor == 0 && len(r.Header) == 0
}

// ServeHTTP takes over the connection of a "PRI *" request and serves
// HTTP/2 on it until it closes.
func (s *h2cServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	closing := s.closing
	if !closing {
		s.serving.Add(1)
	}
	s.mu.Unlock()
	if closing {
		http.Error(w, "the gateway is shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.serving.Done()
	nc, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "HTTP/2 without TLS is not available on this connection: "+err.Error(), http.StatusHTTPVersionNotSupported)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	var rest [len(h2cPreface)]byte
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(rw, rest[:]); err != nil || string(rest[:]) != h2cPreface {
		_ = nc.Close()
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	c := &bufferedConn{Conn: nc, r: rw.Reader}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	s.h2.ServeConn(c, &http2.ServeConnOpts{Context: context.WithoutCancel(r.Context()), BaseConfig: s.base, Handler: s.handler, SawClientPreface: true})
}

// Shutdown takes no new connection, asks the open ones to stop (GOAWAY)
// and waits for their streams to end, until ctx ends; then it closes what
// is left.
func (s *h2cServer) Shutdown(ctx context.Context) {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	_ = s.base.Shutdown(ctx) // no listener of its own: this only sends the GOAWAYs
	done := make(chan struct{})
	go func() { s.serving.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.Close()
		<-done
	}
}

// Close closes every connection at once; their streams fail.
func (s *h2cServer) Close() {
	s.mu.Lock()
	s.closing = true
	conns := make([]net.Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			s.log.Debug("closing an HTTP/2 connection", "err", err)
		}
	}
}

// bufferedConn reads what net/http had buffered before the connection's
// own bytes.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
