package routerd

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The HTTP/2 settings of the router's connections to gateways.
const (
	// A connection silent for h2SendPing is pinged; one whose ping is not
	// answered within h2PingTimeout is closed, failing its streams, so a
	// gateway gone without closing its connections is noticed.
	h2SendPing    = 15 * time.Second
	h2PingTimeout = 10 * time.Second
	// h2ProbeTimeout bounds the check of whether a host speaks h2c.
	h2ProbeTimeout = 5 * time.Second
	// h2RecheckAfter is how long a host that does not speak h2c is reached
	// over HTTP/1.1 before it is asked again.
	h2RecheckAfter = time.Minute
	// h2UnreachableRetry is how long a host that could not be reached is
	// reached over HTTP/1.1 before it is asked again.
	h2UnreachableRetry = time.Second
)

// The start of HTTP/2's client preface and an empty SETTINGS frame: what a
// host that speaks h2c answers with a SETTINGS frame of its own.
const h2Hello = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + "\x00\x00\x00\x04\x00\x00\x00\x00\x00"

// gatewayTransport sends requests to gateways over HTTP/2: without TLS
// (h2c with prior knowledge) to http:// hosts that speak it, with one
// connection carrying many streams (up to the gateway's stream cap, after
// which another opens); to everything else (engines such as vLLM listed as
// backends, https, hosts that do not speak h2c) over plain, the HTTP/1.1
// transport. (Over https the plain transport negotiates HTTP/2 itself when
// its TLS dialer offers h2 in ALPN.)
//
// Whether an http:// host speaks h2c is asked once per host, before its
// first request: a connection that opens with HTTP/2's preface and a
// SETTINGS frame, which a Stargate gateway answers in kind and an HTTP/1.1
// server refuses; a host that does not is asked again after
// h2RecheckAfter. A host that cannot be reached is not judged: the request
// goes over plain, whose dial fails as it always did (a refused connection
// stays a refused connection for the retry rule). Dead connections are
// found by pings (h2SendPing, h2PingTimeout).
type gatewayTransport struct {
	plain http.RoundTripper
	h2    *http.Transport
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	now   func() time.Time
	// open counts the HTTP/2 connections open now.
	open atomic.Int64

	mu    sync.RWMutex
	hosts map[string]*h2Host
}

// h2Host is what the transport knows of one host:port.
type h2Host struct {
	// yes is set once the host answered in kind, and read without mu: the
	// requests to a gateway take no lock here (a lock they all passed
	// would reorder them, and a gateway accepts signed requests only a
	// little out of order).
	yes     atomic.Bool
	mu      sync.Mutex // guards what follows; never held while asking
	probing bool       // a request is asking the host now
	known   bool       // asked, with this answer:
	h2      bool
	until   time.Time // when a "no" is asked again
	retryAt time.Time // an unreachable host is not asked again before
}

func newGatewayTransport(plain http.RoundTripper, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *gatewayTransport {
	if dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}
		dial = d.DialContext
	}
	t := &gatewayTransport{plain: plain, dial: dial, now: time.Now, hosts: make(map[string]*h2Host)}
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	t.h2 = &http.Transport{DialContext: t.dialCounted, Protocols: &p, DisableCompression: true,
		MaxIdleConnsPerHost: 16, IdleConnTimeout: 90 * time.Second,
		HTTP2: &http.HTTP2Config{SendPingTimeout: h2SendPing, PingTimeout: h2PingTimeout}}
	return t
}

// newBackendTransport is the router's default transport to backends:
// HTTP/1.1, and over TLS HTTP/2 where the handshake negotiates it (the TLS
// dialer offers h2 in ALPN and the gateway takes it), with the same pings
// as the h2c connections.
func newBackendTransport(dial, dialTLS func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	return &http.Transport{DialContext: dial, DialTLSContext: dialTLS, ForceAttemptHTTP2: true,
		MaxIdleConns: 2048, MaxIdleConnsPerHost: 1024, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		HTTP2: &http.HTTP2Config{SendPingTimeout: h2SendPing, PingTimeout: h2PingTimeout}}
}

// RoundTrip implements http.RoundTripper.
func (t *gatewayTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "http" && req.Header.Get("Upgrade") == "" && t.speaksH2C(req.Context(), req.URL.Host) {
		resp, err := t.h2.RoundTrip(req)
		if err != nil && req.Context().Err() == nil {
			t.forget(req.URL.Host) // ask again: the address may now serve HTTP/1.1 only
		}
		return resp, err
	}
	return t.plain.RoundTrip(req)
}

// speaksH2C says whether addr takes h2c, asking it if not known (or a "no"
// is old).
func (t *gatewayTransport) speaksH2C(ctx context.Context, addr string) bool {
	addr = withPort(addr)
	t.mu.RLock()
	h, ok := t.hosts[addr]
	t.mu.RUnlock()
	if ok && h.yes.Load() {
		return true
	}
	if !ok {
		h = t.host(addr)
	}
	if !h.startProbe(t.now()) {
		return h.answer()
	}
	yes, err := t.probe(ctx, addr)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.probing = false
	if err != nil { // unreachable: not judged, and not asked again at once
		h.retryAt = t.now().Add(h2UnreachableRetry)
		return h.known && h.h2
	}
	h.known, h.h2, h.until = true, yes, t.now().Add(h2RecheckAfter)
	h.yes.Store(yes)
	return yes
}

// startProbe reports whether the caller should ask the host now (and marks
// it asked): not while another request asks it, while a "no" is fresh, or
// soon after the host could not be reached. The others use the last answer
// meanwhile (HTTP/1.1 before the first), so no request waits on a probe
// but the one that makes it.
func (h *h2Host) startProbe(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.probing || (h.known && (h.h2 || now.Before(h.until))) || now.Before(h.retryAt) {
		return false
	}
	h.probing = true
	return true
}

// answer is the last answer, false (HTTP/1.1) when none.
func (h *h2Host) answer() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.known && h.h2
}

// forget drops what the transport knows of addr's HTTP/2, so that its next
// request asks again.
func (t *gatewayTransport) forget(addr string) {
	addr = withPort(addr)
	t.mu.RLock()
	h, ok := t.hosts[addr]
	t.mu.RUnlock()
	if !ok {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.known = false
	h.yes.Store(false)
}

// withPort is addr with HTTP's default port when it names none.
func withPort(addr string) string {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return net.JoinHostPort(addr, "80")
	}
	return addr
}

// probe opens a connection to addr, sends HTTP/2's preface and an empty
// SETTINGS frame and reports whether the answer starts with a SETTINGS
// frame. An error means the host could not be asked.
func (t *gatewayTransport) probe(ctx context.Context, addr string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, h2ProbeTimeout)
	defer cancel()
	c, err := t.dial(ctx, "tcp", addr)
	if err != nil {
		return false, err
	}
	defer func() { _ = c.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := c.Write([]byte(h2Hello)); err != nil {
		return false, nil
	}
	// A frame header: length (3 bytes), type, flags, stream (4 bytes).
	var head [9]byte
	n := 0
	for n < len(head) {
		m, err := c.Read(head[n:])
		n += m
		if err != nil {
			break
		}
	}
	const typeSettings = 0x4
	return n == len(head) && head[3] == typeSettings && head[4]&0x1 == 0 && head[5]|head[6]|head[7]|head[8] == 0, nil
}

// dialCounted dials for the HTTP/2 transport and counts the connection
// open until it closes.
func (t *gatewayTransport) dialCounted(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := t.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	t.open.Add(1)
	return &countedConn{Conn: c, open: &t.open}, nil
}

// Conns counts the HTTP/2 connections open now.
func (t *gatewayTransport) Conns() int { return int(t.open.Load()) }

// CloseIdleConnections closes both transports' idle connections.
func (t *gatewayTransport) CloseIdleConnections() {
	t.h2.CloseIdleConnections()
	if c, ok := t.plain.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// countedConn takes itself off its count when it first closes.
type countedConn struct {
	net.Conn
	open *atomic.Int64
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.open.Add(-1) })
	return c.Conn.Close()
}

// host is addr's entry, made if there is none.
func (t *gatewayTransport) host(addr string) *h2Host {
	t.mu.Lock()
	defer t.mu.Unlock()
	h, ok := t.hosts[addr]
	if !ok {
		h = &h2Host{}
		t.hosts[addr] = h
	}
	return h
}
