package link

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Server accepts links on a gateway and serves each of their streams with
// the gateway's handler.
type Server struct {
	handler http.Handler
	log     *slog.Logger

	mu      sync.Mutex
	conns   map[*serverConn]struct{}
	closing bool
	streams sync.WaitGroup
}

// NewServer serves link streams with h.
func NewServer(h http.Handler, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{handler: h, log: log, conns: make(map[*serverConn]struct{})}
}

// ErrShutdown ends a stream the server would not start because it is
// shutting down.
var ErrShutdown = errors.New("link: the gateway is shutting down")

// ServeHTTP upgrades the connection to a link and serves it until it closes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.EqualFold(r.Header.Get("Upgrade"), Proto) {
		http.Error(w, fmt.Sprintf("link: want Upgrade: %s on %s", Proto, Path), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	closing := s.closing
	s.mu.Unlock()
	if closing {
		http.Error(w, ErrShutdown.Error(), http.StatusServiceUnavailable)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "link: this connection cannot be upgraded", http.StatusInternalServerError)
		return
	}
	nc, rw, err := hj.Hijack()
	if err != nil {
		s.log.Warn("link upgrade failed", "err", err)
		return
	}
	if _, err := rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + Proto + "\r\n\r\n"); err != nil || rw.Flush() != nil {
		_ = nc.Close()
		return
	}
	c := &serverConn{srv: s, snd: newSender(nc, true), br: rw.Reader, remote: nc.RemoteAddr().String(), streams: make(map[uint32]*serverStream)}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	go c.snd.loop()
	c.readLoop()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// Shutdown stops taking streams, tells every router so, and waits for the
// streams in flight to end or ctx to, then closes every link once the
// frames queued on it (the streams' last) are written.
func (s *Server) Shutdown(ctx context.Context) {
	for _, c := range s.stop() {
		_ = c.snd.send(frameGoAway, 0) // outside mu: a full queue may wait
	}
	done := make(chan struct{})
	go func() { s.streams.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	for _, c := range s.stop() {
		c.snd.closeWhenFlushed(ctx)
	}
}

// Close stops taking streams and closes every link at once, as a crash
// would: the streams in flight fail.
func (s *Server) Close() {
	for _, c := range s.stop() {
		c.snd.fail(net.ErrClosed)
	}
}

// stop marks the server closing and returns its links.
func (s *Server) stop() []*serverConn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	conns := make([]*serverConn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

type serverConn struct {
	srv    *Server
	snd    *sender
	br     *bufio.Reader
	remote string

	mu      sync.Mutex
	streams map[uint32]*serverStream
}

type serverStream struct {
	cancel context.CancelCauseFunc
	// credit is what the stream may still send (guarded by the conn's mu);
	// more wakes a writer waiting for it.
	credit int
	more   chan struct{}
}

var errReset = errors.New("link: the router reset the stream")

func (c *serverConn) readLoop() {
	fr := frameReader{r: c.br}
	var err error
	for {
		typ, id, p, rerr := fr.next()
		if err = rerr; err != nil {
			break
		}
		switch typ {
		case frameRequest:
			err = c.start(id, p)
		case frameReset:
			c.mu.Lock()
			if st := c.streams[id]; st != nil {
				st.cancel(errReset)
			}
			c.mu.Unlock()
		case frameWindow:
			err = c.window(id, p)
		default:
			err = fmt.Errorf("link: unexpected frame type %d from a router", typ)
		}
		if err != nil {
			break
		}
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.srv.log.Warn("link closed", "router", c.remote, "err", err)
	}
	c.snd.fail(fmt.Errorf("link: %w", err))
	c.mu.Lock()
	for _, st := range c.streams {
		st.cancel(errors.New("link: the connection to the router closed"))
	}
	c.mu.Unlock()
}

// window adds a WINDOW frame's bytes to the stream's credit; a window past
// StreamWindow is the router's protocol fault. A stream that has ended may
// still get one that was on its way.
func (c *serverConn) window(id uint32, p []byte) error {
	n, err := decodeWindow(p)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.streams[id]
	if st == nil {
		return nil
	}
	if st.credit+int(n) > StreamWindow {
		return fmt.Errorf("link: stream %d's window opened past %d bytes", id, StreamWindow)
	}
	st.credit += int(n)
	select {
	case st.more <- struct{}{}:
	default:
	}
	return nil
}

// start begins serving stream id; an error is the router's protocol fault
// and closes the link.
func (c *serverConn) start(id uint32, p []byte) error {
	req, err := decodeRequest(p)
	if err != nil {
		return err
	}
	u, err := url.ParseRequestURI(req.uri)
	if err != nil {
		return fmt.Errorf("link: request URI %q: %w", req.uri, err)
	}
	c.srv.mu.Lock()
	closing := c.srv.closing
	if !closing {
		c.srv.streams.Add(1)
	}
	c.srv.mu.Unlock()
	if closing {
		// Not on the reader's goroutine: a full send queue must not stop
		// the link's reads.
		go func() { _ = c.snd.send(frameEnd, id, []byte(ErrShutdown.Error())) }()
		return nil
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	c.mu.Lock()
	if c.streams[id] != nil {
		c.mu.Unlock()
		cancel(nil)
		c.srv.streams.Done()
		return fmt.Errorf("link: stream %d opened twice", id)
	}
	st := &serverStream{cancel: cancel, credit: StreamWindow, more: make(chan struct{}, 1)}
	c.streams[id] = st
	c.mu.Unlock()
	hr := &http.Request{Method: req.method, URL: u, RequestURI: req.uri, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: req.header, Host: req.host, RemoteAddr: c.remote, ContentLength: int64(len(req.body)),
		Body: io.NopCloser(bytes.NewReader(req.body))}
	go c.serve(ctx, id, st, hr.WithContext(ctx), cancel)
	return nil
}

func (c *serverConn) serve(ctx context.Context, id uint32, st *serverStream, r *http.Request, cancel context.CancelCauseFunc) {
	w := &streamWriter{conn: c, id: id, st: st, ctx: ctx, header: make(http.Header)}
	defer func() {
		end := []byte(nil)
		if v := recover(); v != nil {
			c.srv.log.Error("link stream handler panicked", "path", r.URL.Path, "panic", v)
			end = []byte(fmt.Sprintf("link: the gateway's handler failed: %v", v))
			w.head = nil // an error before the header fails the request
		} else if !w.wroteHeader {
			w.WriteHeader(http.StatusOK)
		}
		if w.err != nil && end == nil {
			end = []byte(w.err.Error()) // a header too large to encode
			w.head = nil
		}
		if ctx.Err() == nil { // the send fails harmlessly if the link did
			_ = w.send(frameEnd, end)
		}
		c.mu.Lock()
		delete(c.streams, id)
		c.mu.Unlock()
		cancel(nil)
		c.srv.streams.Done()
	}()
	c.srv.handler.ServeHTTP(w, r)
}

// streamWriter is a stream's http.ResponseWriter. The header is encoded at
// WriteHeader and leaves as a RESPONSE frame with the first body bytes (or
// at Flush, or at the end); every write is a DATA frame queued for the link
// at once, so Flush has nothing else to do. A write waits while the stream's
// window is shut, as a write to a TCP connection whose reader is slow does.
type streamWriter struct {
	conn        *serverConn
	id          uint32
	st          *serverStream
	ctx         context.Context
	header      http.Header
	wroteHeader bool
	head        []byte // the encoded header, until it is sent
	err         error
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(status int) {
	if w.wroteHeader || status < 200 || status > 999 {
		return
	}
	w.wroteHeader = true
	w.head, w.err = appendResponse(nil, status, w.header)
}

// send queues one frame of the stream, preceded in the same queue append by
// the header if it has not left yet.
func (w *streamWriter) send(typ byte, payload []byte) error {
	head := w.head
	w.head = nil
	if head != nil {
		return w.conn.snd.sendAfter(frameResponse, head, typ, w.id, payload)
	}
	return w.conn.snd.send(typ, w.id, payload)
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if err := w.ctx.Err(); err != nil {
		return 0, context.Cause(w.ctx)
	}
	n := 0
	for len(p) > 0 {
		size, err := w.take(len(p))
		if err != nil {
			return n, err
		}
		chunk := p[:size]
		if w.err = w.send(frameData, chunk); w.err != nil {
			return n, w.err
		}
		n += len(chunk)
		p = p[len(chunk):]
	}
	return n, nil
}

// Flush sends the header if it has not left yet.
func (w *streamWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.head != nil && w.err == nil {
		w.err = w.conn.snd.send(frameResponse, w.id, w.head)
		w.head = nil
	}
}

// take waits until the stream may send and takes up to want bytes of its
// credit; it fails when the stream ends first.
func (w *streamWriter) take(want int) (int, error) {
	for {
		w.conn.mu.Lock()
		if w.st.credit > 0 {
			n := min(want, w.st.credit)
			w.st.credit -= n
			w.conn.mu.Unlock()
			return n, nil
		}
		w.conn.mu.Unlock()
		select {
		case <-w.st.more:
		case <-w.ctx.Done():
			return 0, context.Cause(w.ctx)
		}
	}
}
