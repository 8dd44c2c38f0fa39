package link

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// maxLinkBody is the largest request body sent over a link: a REQUEST frame
// holds the body, the headers (at most maxHeaderBytes) and the method, URI
// and host (at most 64 KiB each).
const maxLinkBody = MaxFrame - maxHeaderBytes - 3*(2+0xffff)

// How long a backend that refused the upgrade is reached over plain HTTP
// before the next try, and the longest wait for a link's handshake.
const (
	retryUpgradeAfter = time.Minute
	handshakeTimeout  = 5 * time.Second
)

// Transport is an http.RoundTripper that sends requests to hosts that speak
// the link protocol over one link per host, and everything else (https,
// upgrades, hosts that refused the link, bodies of unknown length or too
// large for a frame) through Fallback.
type Transport struct {
	Fallback http.RoundTripper
	// Dial opens a link's connection; nil dials TCP. A router that runs a
	// gateway in its own process dials it in memory (package memnet).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// DialTLS, if set, opens the links of https hosts: a connection past a
	// verified TLS handshake, on which the upgrade then runs. Without it
	// https goes through Fallback.
	DialTLS func(ctx context.Context, network, addr string) (net.Conn, error)
	dialer  net.Dialer

	mu     sync.Mutex
	hosts  map[string]*hostLink
	closed bool
}

// NewTransport returns a Transport over fallback.
func NewTransport(fallback http.RoundTripper) *Transport {
	return &Transport{Fallback: fallback, dialer: net.Dialer{Timeout: handshakeTimeout, KeepAlive: 15 * time.Second},
		hosts: make(map[string]*hostLink)}
}

// hostLink is one host's link, opened on first use.
type hostLink struct {
	mu        sync.Mutex // held while dialing
	conn      *clientConn
	plainTill time.Time // the host refused the upgrade: plain HTTP until then
}

// Close closes every link; their streams in flight fail. The fallback's
// idle connections close too.
func (t *Transport) Close() {
	t.mu.Lock()
	t.closed = true
	hosts := t.hosts
	t.hosts = make(map[string]*hostLink)
	t.mu.Unlock()
	for _, h := range hosts {
		h.mu.Lock()
		if h.conn != nil {
			h.conn.snd.fail(net.ErrClosed)
		}
		h.mu.Unlock()
	}
	t.CloseIdleConnections()
}

// CloseIdleConnections closes the fallback's idle connections (links are
// never idle in that sense: they close with Close).
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Links counts the hosts with an open link.
func (t *Transport) Links() int {
	t.mu.Lock()
	hosts := make([]*hostLink, 0, len(t.hosts))
	for _, h := range t.hosts {
		hosts = append(hosts, h)
	}
	t.mu.Unlock()
	n := 0
	for _, h := range hosts {
		h.mu.Lock()
		if h.conn != nil && !h.conn.done() {
			n++
		}
		h.mu.Unlock()
	}
	return n
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	secure := req.URL.Scheme == "https" && t.DialTLS != nil
	if req.URL.Scheme != "http" && !secure || req.Header.Get("Upgrade") != "" || req.ContentLength < 0 || req.ContentLength > maxLinkBody {
		return t.Fallback.RoundTrip(req)
	}
	c, err := t.link(req.Context(), req.URL.Host, secure)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	if c == nil {
		return t.Fallback.RoundTrip(req)
	}
	var body []byte
	if req.Body != nil {
		body, err = io.ReadAll(io.LimitReader(req.Body, MaxFrame+1))
		_ = req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("link: reading the request body: %w", err)
		}
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	head, err := appendRequestHead(nil, req.Method, req.URL.RequestURI(), host, req.Header)
	if err != nil {
		return nil, err
	}
	if len(head)+len(body) > MaxFrame {
		return nil, fmt.Errorf("link: request of %d bytes is larger than a frame (%d)", len(head)+len(body), MaxFrame)
	}
	return c.roundTrip(req, head, body)
}

// link returns host's open link, opening one if need be; nil (and no error)
// means the host speaks plain HTTP only. A dial error is returned as is, so
// that callers can tell a refused connection.
func (t *Transport) link(ctx context.Context, host string, secure bool) (*clientConn, error) {
	key := host
	if secure {
		key = "tls:" + host
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, nil
	}
	h := t.hosts[key]
	if h == nil {
		h = &hostLink{}
		t.hosts[key] = h
	}
	t.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conn != nil && !h.conn.done() && !h.conn.draining() {
		return h.conn, nil
	}
	if time.Now().Before(h.plainTill) {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), handshakeTimeout)
	defer cancel()
	dial := t.Dial
	if dial == nil {
		dial = t.dialer.DialContext
	}
	if secure {
		dial = t.DialTLS
	}
	nc, err := dial(dctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	br, ok := handshake(nc, host)
	if !ok {
		_ = nc.Close()
		h.plainTill = time.Now().Add(retryUpgradeAfter)
		return nil, nil
	}
	c := &clientConn{snd: newSender(nc, false), br: br, streams: make(map[uint32]*clientStream)}
	go c.snd.loop()
	go c.readLoop()
	h.conn = c
	return c, nil
}

// handshake asks for the upgrade; false if the host said anything but yes.
func handshake(nc net.Conn, host string) (*bufio.Reader, bool) {
	_ = nc.SetDeadline(time.Now().Add(handshakeTimeout))
	defer func() { _ = nc.SetDeadline(time.Time{}) }()
	req := "GET " + Path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: Upgrade\r\nUpgrade: " + Proto + "\r\n\r\n"
	if _, err := io.WriteString(nc, req); err != nil {
		return nil, false
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, false
	}
	_ = resp.Body.Close()
	return br, resp.StatusCode == http.StatusSwitchingProtocols && strings.EqualFold(resp.Header.Get("Upgrade"), Proto)
}

// clientConn is the router's end of one link.
type clientConn struct {
	snd *sender
	br  *bufio.Reader

	mu        sync.Mutex
	streams   map[uint32]*clientStream
	nextID    uint32
	goingAway bool
}

func (c *clientConn) done() bool {
	select {
	case <-c.snd.closed:
		return true
	default:
		return false
	}
}

func (c *clientConn) draining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goingAway
}

// roundTrip sends one request and waits for its response header.
func (c *clientConn) roundTrip(req *http.Request, head, body []byte) (*http.Response, error) {
	st := &clientStream{conn: c, head: make(chan error, 1), notify: make(chan struct{}, 1)}
	c.mu.Lock()
	c.nextID++
	for c.nextID == 0 || c.streams[c.nextID] != nil { // after 2^32 streams
		c.nextID++
	}
	st.id = c.nextID
	c.streams[st.id] = st
	c.mu.Unlock()
	if err := c.snd.send(frameRequest, st.id, head, body); err != nil {
		c.remove(st.id)
		return nil, fmt.Errorf("link: sending the request: %w", err)
	}
	ctx := req.Context()
	st.stop = context.AfterFunc(ctx, func() { st.abort(ctx.Err()) })
	if err := <-st.head; err != nil {
		st.stop()
		return nil, err
	}
	return &http.Response{Status: fmt.Sprintf("%d %s", st.status, http.StatusText(st.status)), StatusCode: st.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: st.header, Body: st, ContentLength: -1, Request: req}, nil
}

func (c *clientConn) remove(id uint32) *clientStream {
	c.mu.Lock()
	st := c.streams[id]
	delete(c.streams, id)
	last := c.goingAway && len(c.streams) == 0
	c.mu.Unlock()
	if last {
		c.snd.fail(errGoneAway)
	}
	return st
}

var errGoneAway = errors.New("link: the gateway is shutting down")

func (c *clientConn) stream(id uint32) *clientStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

func (c *clientConn) readLoop() {
	fr := frameReader{r: c.br}
	var err error
	for err == nil {
		typ, id, p, rerr := fr.next()
		if err = rerr; err != nil {
			break
		}
		switch typ {
		case frameResponse:
			if st := c.stream(id); st != nil {
				status, h, derr := decodeResponse(p)
				if derr != nil {
					err = derr
					break
				}
				st.respond(status, h)
			}
		case frameData:
			if st := c.stream(id); st != nil {
				st.push(p)
			}
		case frameEnd:
			if st := c.remove(id); st != nil {
				st.end(p)
			}
		case frameGoAway:
			c.mu.Lock()
			c.goingAway = true
			idle := len(c.streams) == 0
			c.mu.Unlock()
			if idle {
				err = errGoneAway
			}
		default:
			err = fmt.Errorf("link: unexpected frame type %d from a gateway", typ)
		}
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	c.snd.fail(fmt.Errorf("link: connection lost: %w", err))
	c.mu.Lock()
	streams := c.streams
	c.streams = make(map[uint32]*clientStream)
	c.mu.Unlock()
	for _, st := range streams {
		st.fail(fmt.Errorf("link: connection to the gateway lost: %w", err))
	}
}

// clientStream is one request on a link; after the response header it is
// the response body.
type clientStream struct {
	conn   *clientConn
	id     uint32
	head   chan error // capacity 1: the header arrived (nil) or the stream failed first
	notify chan struct{}
	stop   func() bool // stops watching the request's context

	status int
	header http.Header

	mu       sync.Mutex
	answered bool
	buf      []byte
	off      int
	taken    int // bytes read since the last WINDOW frame
	ended    bool
	err      error
	closed   bool
}

func (st *clientStream) respond(status int, h http.Header) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.answered {
		return
	}
	st.answered, st.status, st.header = true, status, h
	st.head <- nil
}

func (st *clientStream) push(p []byte) {
	st.mu.Lock()
	if st.closed || st.err != nil {
		st.mu.Unlock()
		return
	}
	if st.off > 0 && st.off == len(st.buf) {
		st.buf, st.off = st.buf[:0], 0
	}
	if len(st.buf)-st.off+len(p) > StreamWindow {
		st.mu.Unlock()
		// Not on the reader's goroutine: a full send queue must not stop
		// the link's reads.
		go st.abort(fmt.Errorf("link: the gateway sent past the stream's %d-byte window", StreamWindow))
		return
	}
	st.buf = append(st.buf, p...)
	st.mu.Unlock()
	st.wake()
}

func (st *clientStream) wake() {
	select {
	case st.notify <- struct{}{}:
	default:
	}
}

// end is the gateway's END: a clean end of the body, or an error.
func (st *clientStream) end(p []byte) {
	if len(p) > 0 {
		st.fail(errors.New(string(p)))
		return
	}
	st.mu.Lock()
	st.ended = true
	if !st.answered { // END without a header: not a valid answer
		st.answered = true
		st.head <- errors.New("link: the gateway ended a stream without answering")
	}
	st.mu.Unlock()
	st.wake()
}

// fail ends the stream with err (the first end wins).
func (st *clientStream) fail(err error) {
	st.mu.Lock()
	if st.err == nil && !st.ended {
		st.err = err
	}
	if !st.answered {
		st.answered = true
		st.head <- err
	}
	st.mu.Unlock()
	st.wake()
}

// abort fails the stream from the router's side and tells the gateway.
func (st *clientStream) abort(err error) {
	st.fail(err)
	st.reset()
}

// reset tells the gateway to stop the stream, unless it has ended.
func (st *clientStream) reset() {
	if st.conn.remove(st.id) != nil {
		_ = st.conn.snd.send(frameReset, st.id)
	}
}

// Read implements io.Reader for the response body.
func (st *clientStream) Read(p []byte) (int, error) {
	for {
		st.mu.Lock()
		if st.off < len(st.buf) {
			n := copy(p, st.buf[st.off:])
			st.off += n
			// Reopen the gateway's window once half of it has been read:
			// one WINDOW frame per StreamWindow/2 bytes, none for the
			// short answers that are most of the traffic.
			var grant int
			if st.taken += n; st.taken >= StreamWindow/2 && !st.ended && st.err == nil {
				grant, st.taken = st.taken, 0
			}
			st.mu.Unlock()
			if grant > 0 {
				_ = st.conn.snd.send(frameWindow, st.id, appendWindow(nil, uint32(grant)))
			}
			return n, nil
		}
		err, ended, closed := st.err, st.ended, st.closed
		st.mu.Unlock()
		switch {
		case err != nil:
			return 0, err
		case ended:
			return 0, io.EOF
		case closed:
			return 0, errors.New("link: read on a closed body")
		}
		<-st.notify
	}
}

// Close implements io.Closer: a body closed before its end resets the
// stream, so the gateway stops working on it.
func (st *clientStream) Close() error {
	st.mu.Lock()
	already := st.closed
	st.closed = true
	st.buf, st.off = nil, 0
	st.mu.Unlock()
	if already {
		return nil
	}
	if st.stop != nil {
		st.stop()
	}
	st.reset()
	st.wake()
	return nil
}
