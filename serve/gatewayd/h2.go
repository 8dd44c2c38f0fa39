package gatewayd

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/stargate-llm/stargate/serve/httplimit"
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

// h2cRead is the part of HTTP/2's client preface net/http has read as a
// "PRI *" request before it hands the connection over.
const h2cRead = "PRI * HTTP/2.0\r\n\r\n"

// h2cServer serves routers' unencrypted HTTP/2 connections (h2c, with prior
// knowledge: RFC 9113, section 3.3) with the gateway's API handler, on the
// same port as HTTP/1.1, whichever http.Server runs that port. That server
// hands it each connection that starts with HTTP/2's preface as a "PRI *"
// request; it takes the connection over and passes it, preface restored,
// to an http.Server of its own that speaks unencrypted HTTP/2 only (net/
// http's HTTP/2, with a stream cap and pings). (Over TLS, the port's own
// http.Server serves HTTP/2 when its ALPN offers h2.) Its server tracks the
// connections, drains them on Shutdown (GOAWAY) and closes them on Close.
type h2cServer struct {
	srv   *http.Server
	queue *connQueue

	mu      sync.Mutex
	started bool
	closing bool
	served  chan struct{} // closed when srv.Serve returns (if started)
}

func newH2CServer(h http.Handler, log *slog.Logger) *h2cServer {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: h, Protocols: &p, IdleTimeout: h2IdleTimeout,
		HTTP2:    &http.HTTP2Config{MaxConcurrentStreams: h2MaxStreams, SendPingTimeout: h2ReadIdle, PingTimeout: h2PingTimeout},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)}
	return &h2cServer{srv: srv, queue: newConnQueue(), served: make(chan struct{})}
}

// start starts the HTTP/2 server at the first connection it takes over,
// r's, and reports whether the gateway takes connections (false once it is
// shutting down). The listener's limits (package httplimit) apply to every
// stream as to every HTTP/1.1 request: the streams are served through the
// same limited handler that served r, with its body budget, header cap and
// timeouts (the first listener's, where the gateway serves on two).
func (s *h2cServer) start(r *http.Request) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	if !s.started {
		s.started = true
		if outer, lim, ok := httplimit.Limited(r); ok {
			s.srv.Handler, s.srv.MaxHeaderBytes, s.srv.ReadHeaderTimeout = outer, lim.MaxHeaderBytes, lim.ReadHeaderTimeout
		}
		go func() { defer close(s.served); _ = s.srv.Serve(s.queue) }()
	}
	return true
}

// isH2CPreface says whether r is the first line of HTTP/2's client preface.
func isH2CPreface(r *http.Request) bool {
	return r.Method == "PRI" && r.RequestURI == "*" && r.ProtoMajor == 2 && r.ProtoMinor == 0 && len(r.Header) == 0
}

// ServeHTTP takes over the connection of a "PRI *" request and hands it to
// the HTTP/2 server.
func (s *h2cServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.start(r) {
		http.Error(w, "the gateway is shutting down", http.StatusServiceUnavailable)
		return
	}
	nc, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "HTTP/2 without TLS is not available on this connection: "+err.Error(), http.StatusHTTPVersionNotSupported)
		return
	}
	_ = nc.SetDeadline(time.Time{})
	s.queue.hand(&bufferedConn{Conn: nc, r: io.MultiReader(strings.NewReader(h2cRead), rw.Reader)})
}

// Shutdown takes no new connection, asks the open ones to stop (GOAWAY)
// and waits for their streams to end, until ctx ends; then it closes what
// is left.
func (s *h2cServer) Shutdown(ctx context.Context) {
	started := s.stop()
	if !started {
		return
	}
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.served
}

// Close closes every connection at once; their streams fail.
func (s *h2cServer) Close() {
	if s.stop() {
		_ = s.srv.Close()
		<-s.served
	}
}

// stop refuses new connections and says whether the server had started.
func (s *h2cServer) stop() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	_ = s.queue.Close()
	return s.started
}

// connQueue is a net.Listener whose connections are handed to it.
type connQueue struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newConnQueue() *connQueue {
	return &connQueue{ch: make(chan net.Conn), done: make(chan struct{})}
}

// hand gives c to Accept, or closes it if the queue is closed.
func (q *connQueue) hand(c net.Conn) {
	select {
	case q.ch <- c:
	case <-q.done:
		_ = c.Close()
	}
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.ch:
		return c, nil
	case <-q.done:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error {
	q.once.Do(func() { close(q.done) })
	return nil
}

func (q *connQueue) Addr() net.Addr { return h2cAddr{} }

type h2cAddr struct{}

func (h2cAddr) Network() string { return "h2c" }
func (h2cAddr) String() string  { return "h2c" }

// bufferedConn reads r (what net/http had read and buffered, then the
// connection) instead of the connection itself.
type bufferedConn struct {
	net.Conn
	r io.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
