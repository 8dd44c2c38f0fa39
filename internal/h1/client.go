package h1

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/stargate-llm/stargate/internal/rawio"
)

// Target is an engine's base URL, parsed once.
type Target struct {
	addr   string // host:port to dial
	host   string // the Host field
	prefix string // the base URL's path, without a trailing slash
}

// ParseTarget reads an engine's base URL, such as http://10.0.0.7:8000.
func ParseTarget(base string) (Target, error) {
	u, err := url.Parse(base)
	if err != nil {
		return Target{}, fmt.Errorf("h1: engine URL %q: %w", base, err)
	}
	switch {
	case u.Scheme != "http":
		return Target{}, fmt.Errorf("h1: engine URL %q: scheme %q, want http", base, u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return Target{}, fmt.Errorf("h1: engine URL %q has no host", base)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return Target{}, fmt.Errorf("h1: engine URL %q: want scheme, host, port and path only", base)
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	return Target{addr: net.JoinHostPort(u.Hostname(), port), host: u.Host, prefix: strings.TrimRight(u.EscapedPath(), "/")}, nil
}

// Request is one request to an engine.
type Request struct {
	Method string
	Path   string      // after the target's path, such as /v1/chat/completions
	Header http.Header // more fields; Host and Content-Length are the client's
	Body   []byte
}

// Response is the head of an engine's answer.
type Response struct {
	StatusCode int
	Header     http.Header
}

// ErrTimeout says the engine sent no byte within the client's IdleTimeout.
var ErrTimeout = errors.New("no byte from the engine within the idle timeout")

// ErrClosed says the client was closed.
var ErrClosed = errors.New("h1: client closed")

// NotSentError is a failure before the whole request was written: the engine
// cannot have run it.
type NotSentError struct{ Err error }

func (e *NotSentError) Error() string { return "request not sent: " + e.Err.Error() }
func (e *NotSentError) Unwrap() error { return e.Err }

// Client sends requests to engines over pooled keep-alive connections. The
// zero value is ready to use; it is safe for concurrent use.
type Client struct {
	// IdleTimeout is the longest silence of the engine while its answer is
	// awaited or read; time the body callback spends does not count. Zero
	// means no limit.
	IdleTimeout time.Duration
	// MaxIdlePerHost caps the idle connections kept per engine; 0 means 256.
	MaxIdlePerHost int
	// IdleConnTimeout closes pooled connections unused for longer; 0 means
	// 90 s.
	IdleConnTimeout time.Duration
	// DialTimeout bounds a connection's setup; 0 means 10 s.
	DialTimeout time.Duration

	mu     sync.Mutex
	idle   map[string][]*conn // per address, oldest first
	closed bool
}

// Do sends req to t and reads the answer. head gets the answer's head; then
// body gets each piece of the body as it arrives, valid only during the
// call. Do returns nil once the body has ended. An error from head or body
// ends the exchange and comes back unchanged; a failure before the request
// was written whole is a *NotSentError. Cancelling ctx ends the exchange
// with the context's cause.
func (cl *Client) Do(ctx context.Context, t Target, req *Request, head func(*Response) error, body func([]byte) error) error {
	c, err := cl.get(ctx, t)
	if err != nil {
		return &NotSentError{err}
	}
	retry, err := cl.once(ctx, c, t, req, head, body)
	if !retry {
		return err
	}
	// The engine closed a kept connection before the request was written
	// whole, as it does when it restarts: the others kept for it are likely
	// closed too. Send on a new one.
	cl.dropIdle(t.addr)
	if c, err = cl.get(ctx, t); err != nil {
		return &NotSentError{err}
	}
	_, err = cl.once(ctx, c, t, req, head, body)
	return err
}

// once runs one exchange on c, then pools c or closes it, also when a
// callback panics. It reports whether to send again: only when a reused
// connection failed before the request was written whole, so the engine
// cannot have run it. A request written whole and then lost is not sent
// again (the engine may be running it), as net/http does not resend a POST.
func (cl *Client) once(ctx context.Context, c *conn, t Target, req *Request, head func(*Response) error, body func([]byte) error) (retry bool, err error) {
	pooled := false
	defer func() {
		if !pooled {
			_ = c.nc.Close()
		}
	}()
	err = c.exchange(ctx, cl.IdleTimeout, t, req, head, body)
	if err == nil && c.reusable() {
		cl.put(t.addr, c)
		pooled = true
	}
	var notSent *NotSentError
	return errors.As(err, &notSent) && c.reused && ctx.Err() == nil && connGone(err), err
}

// connGone reports whether err is the peer's end of a connection.
func connGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// dropIdle closes the pooled connections to addr.
func (cl *Client) dropIdle(addr string) {
	cl.mu.Lock()
	list := cl.idle[addr]
	delete(cl.idle, addr)
	cl.mu.Unlock()
	closeAll(list)
}

// closeAll closes conns.
func closeAll(conns []*conn) {
	for _, c := range conns {
		_ = c.nc.Close()
	}
}

// CloseIdleConnections closes the pooled connections and keeps the client
// usable.
func (cl *Client) CloseIdleConnections() {
	cl.mu.Lock()
	idle := cl.idle
	cl.idle = nil
	cl.mu.Unlock()
	for _, list := range idle {
		closeAll(list)
	}
}

// Close closes the pooled connections; a later Do fails with ErrClosed and
// connections in use close when their exchange ends.
func (cl *Client) Close() {
	cl.mu.Lock()
	cl.closed = true
	cl.mu.Unlock()
	cl.CloseIdleConnections()
}

// get takes the newest idle connection to t, or dials one.
func (cl *Client) get(ctx context.Context, t Target) (*conn, error) {
	now := time.Now()
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil, ErrClosed
	}
	for {
		list := cl.idle[t.addr]
		n := len(list)
		if n == 0 {
			break
		}
		c := list[n-1]
		if now.Sub(c.idleSince) >= cl.idleTimeout() {
			delete(cl.idle, t.addr) // the newest is too old, so all are
			cl.mu.Unlock()
			closeAll(list)
			cl.mu.Lock()
			continue
		}
		list[n-1] = nil
		cl.idle[t.addr] = list[:n-1]
		cl.mu.Unlock()
		if c.alive() {
			c.reused = true
			return c, nil
		}
		_ = c.nc.Close()
		cl.mu.Lock()
	}
	cl.mu.Unlock()
	timeout := cl.DialTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	nc, err := (&net.Dialer{Timeout: timeout}).DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return nil, err
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		_ = nc.Close()
		return nil, fmt.Errorf("h1: dialling %s gave a %T, want a TCP connection", t.addr, nc)
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("h1: %s: %w", t.addr, err)
	}
	return &conn{nc: tc, rc: rc, buf: make([]byte, bufSize)}, nil
}

// alive reports whether a pooled connection is still open and silent. The
// engine may have closed it while it sat idle (uvicorn does after 5 s) or
// written to it; a request sent on it could then not be told from one the
// engine read and died on, and stray bytes would be read as its answer.
func (c *conn) alive() bool {
	ok := false
	if err := c.rc.Control(func(fd uintptr) { ok = rawio.Peek(fd) == syscall.EAGAIN }); err != nil {
		return false
	}
	return ok
}

// put returns c to the pool, closing it if the pool is full or closed.
func (cl *Client) put(addr string, c *conn) {
	now := time.Now()
	c.idleSince = now
	max := cl.MaxIdlePerHost
	if max == 0 {
		max = 256
	}
	var drop []*conn
	cl.mu.Lock()
	list := cl.idle[addr]
	// The oldest connection may have outlived the idle timeout while the
	// newer ones kept the pool busy.
	if len(list) > 0 && now.Sub(list[0].idleSince) >= cl.idleTimeout() {
		drop = append(drop, list[0])
		list = list[1:]
	}
	if cl.closed || len(list) >= max {
		drop = append(drop, c)
	} else {
		if cl.idle == nil {
			cl.idle = make(map[string][]*conn)
		}
		list = append(list, c)
	}
	if len(list) > 0 {
		cl.idle[addr] = list
	}
	cl.mu.Unlock()
	closeAll(drop)
}

func (cl *Client) idleTimeout() time.Duration {
	if cl.IdleConnTimeout == 0 {
		return 90 * time.Second
	}
	return cl.IdleConnTimeout
}

// bufSize is each connection's read buffer, and so the largest answer head
// and chunk line it accepts.
const bufSize = 16 << 10

// conn is one keep-alive connection and the state of the answer on it.
type conn struct {
	nc        *net.TCPConn
	rc        syscall.RawConn
	buf       []byte // read buffer; buf[r:w] is read and not yet taken
	r, w      int
	wbuf      []byte // the request being written
	idleSince time.Time
	reused    bool      // taken from the pool
	drained   bool      // the last read came back short: the socket was empty after it
	misses    int       // reads that found nothing, over the connection's life
	active    time.Time // the engine's last byte, or the end of the last callback
	keep      bool      // the answer allows reuse
	cancelled bool      // the context's cancel touched the deadlines

	// The body being read.
	framing int
	left    int64 // bytes left: the body's (framingLength) or the chunk's
	chunk   int   // chunked decoding state
}

// Body framings.
const (
	framingNone   = iota // no body
	framingLength        // Content-Length
	framingChunked
	framingClose // until the engine closes the connection
)

// Chunked decoding states.
const (
	chunkSize = iota // want a size line
	chunkData
	chunkDataEnd // want the CRLF after the data
	chunkTrailer // want trailer lines up to an empty one
	chunkDone
)

// exchange writes req and reads the answer on c.
func (c *conn) exchange(ctx context.Context, timeout time.Duration, t Target, req *Request, head func(*Response) error, body func([]byte) error) error {
	c.keep, c.r, c.w, c.framing = false, 0, 0, framingNone
	stop := context.AfterFunc(ctx, func() { _ = c.nc.SetDeadline(aLongTimeAgo) })
	defer func() {
		if !stop() {
			c.cancelled = true // the deadline is in the past now
		}
	}()
	c.active = time.Now()
	var deadline time.Time
	if timeout > 0 {
		deadline = c.active.Add(timeout)
	}
	if err := c.nc.SetWriteDeadline(deadline); err != nil {
		return &NotSentError{err}
	}
	if err := c.nc.SetReadDeadline(c.nextLook(timeout)); err != nil {
		return &NotSentError{err}
	}
	if ctx.Err() != nil { // cancelled before the deadlines were set
		return &NotSentError{context.Cause(ctx)}
	}
	if err := c.write(t, req); err != nil {
		return &NotSentError{cause(ctx, err, timeout)}
	}
	// One pump reads the head and the body, so the wait for the first
	// event after the head keeps the poller's word (see pump).
	var resp *Response
	err := c.pump(ctx, timeout, func() (bool, error) {
		if resp == nil {
			var err error
			if resp, err = c.parseHead(req.Method); resp == nil || err != nil {
				return false, err
			}
			if err := head(resp); err != nil {
				return false, err
			}
			if c.framing == framingNone {
				return true, nil
			}
			if c.r == c.w {
				return false, nil
			}
		}
		return c.takeBody(body)
	})
	switch {
	case resp == nil || !errors.Is(err, io.EOF):
		return err
	case c.framing == framingClose:
		return nil
	}
	return fmt.Errorf("engine closed the connection mid-answer: %w", io.ErrUnexpectedEOF)
}

var aLongTimeAgo = time.Unix(1, 0)

// reusable reports whether the connection may carry another request (an
// answer framed by the connection's end never allows it: see frame).
func (c *conn) reusable() bool {
	return c.keep && !c.cancelled && c.r == c.w
}

// write sends the request line, the fields and the body in one write.
func (c *conn) write(t Target, req *Request) error {
	if !validName(req.Method) {
		return fmt.Errorf("h1: method %q is not allowed", req.Method)
	}
	if req.Path == "" || req.Path[0] != '/' || strings.ContainsFunc(req.Path, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("h1: path %q: want one starting with / and without spaces or control characters", req.Path)
	}
	b := append(c.wbuf[:0], req.Method...)
	b = append(b, ' ')
	b = append(b, t.prefix...)
	b = append(b, req.Path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, t.host...)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		if !validName(k) {
			return fmt.Errorf("h1: field name %q is not allowed", k)
		}
		ck := http.CanonicalHeaderKey(k)
		if ck == "Host" || ck == "Content-Length" || ck == "Transfer-Encoding" {
			continue
		}
		for _, v := range vs {
			if strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("h1: field %s has a line break or NUL in its value", k)
			}
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if len(req.Body) > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(req.Body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	var err error
	if len(req.Body) <= 64<<10 {
		b = append(b, req.Body...)
		_, err = rawio.WriteAll(c.rc, b)
	} else if _, err = rawio.WriteAll(c.rc, b); err == nil {
		_, err = rawio.WriteAll(c.rc, req.Body)
	}
	if cap(b) <= 64<<10 {
		c.wbuf = b[:0]
	}
	return err
}

// validName reports whether k is a field name: a non-empty token.
func validName(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		ch := k[i]
		if ch <= ' ' || ch >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, ch) >= 0 {
			return false
		}
	}
	return true
}

// pump feeds take from the connection until take is done. take looks at
// c.buf[c.r:c.w], moves c.r past what it used and says whether it is done.
//
// Reads run inside one RawConn.Read, which resets the poller's readiness
// once, on entry; so the first read of each pump tries the socket, and
// after a read that came back short the next one waits to be told the
// socket has more, keeping the poller's word across the wait.
func (c *conn) pump(ctx context.Context, timeout time.Duration, take func() (bool, error)) error {
	for {
		var done bool
		var takeErr, readErr error
		c.drained = false
		err := c.rc.Read(func(fd uintptr) bool {
			for {
				if c.w > c.r {
					before := c.r
					done, takeErr = take()
					if c.r != before { // bytes left over from a partial line do not reset the engine's silence
						c.active = time.Now()
					}
					if done || takeErr != nil {
						return true
					}
				}
				if c.r == c.w {
					c.r, c.w = 0, 0
				} else if c.r > 0 && c.w == len(c.buf) {
					c.w = copy(c.buf, c.buf[c.r:c.w])
					c.r = 0
				}
				if c.w == len(c.buf) {
					takeErr = fmt.Errorf("engine sent a header or chunk line longer than %d bytes", bufSize)
					return true
				}
				if c.drained && c.framing != framingClose {
					c.drained = false
					return false // wait for more
				}
				n, errno := rawio.Read(fd, c.buf[c.w:])
				switch errno {
				case 0:
				case syscall.EAGAIN:
					c.misses++
					return false
				default:
					readErr = os.NewSyscallError("read", errno)
					return true
				}
				if n == 0 {
					readErr = io.EOF
					return true
				}
				c.drained = n < len(c.buf)-c.w
				c.w += n
				c.active = time.Now()
			}
		})
		switch {
		case err == nil && takeErr != nil:
			return takeErr
		case err == nil && readErr != nil:
			return cause(ctx, readErr, timeout)
		case err == nil:
			return nil
		case !errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil:
			return cause(ctx, err, timeout)
		}
		// The deadline passed: the engine's silence, or time to look again.
		if timeout > 0 && !time.Now().Before(c.active.Add(timeout)) {
			return ErrTimeout
		}
		if err := c.nc.SetReadDeadline(c.nextLook(timeout)); err != nil {
			return err
		}
		if ctx.Err() != nil { // cancelled between the check and the new deadline
			return context.Cause(ctx)
		}
	}
}

// lookAgain is how long pump waits on the poller before it tries the socket
// once more. A read that comes back short does not show an end of the
// connection that arrived with the data, and no later wake-up will; nginx
// learns it from EPOLLRDHUP, which Go's poller keeps to itself. So an engine
// that closes the connection mid-answer right after its last bytes is
// noticed within this of its last byte, not after the whole idle timeout.
// A look costs a read, at most one per this much of a streamed answer. (A
// variable, so that a test can make a lost wake-up show.)
var lookAgain = 250 * time.Millisecond

// nextLook is the read deadline: the next look, this long after the
// engine's last byte, or the idle timeout's end if sooner.
func (c *conn) nextLook(timeout time.Duration) time.Time {
	next := c.active.Add(lookAgain)
	if now := time.Now(); next.Before(now) {
		next = now.Add(lookAgain)
	}
	if timeout > 0 {
		if end := c.active.Add(timeout); end.Before(next) {
			return end
		}
	}
	return next
}

// cause names why an exchange failed: the context's cause once it is done,
// the idle timeout for a deadline, else err.
func cause(ctx context.Context, err error, timeout time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if timeout > 0 && errors.Is(err, os.ErrDeadlineExceeded) {
		return ErrTimeout
	}
	return err
}

// takeBody hands the body's bytes in c.buf[c.r:c.w] to body. Chunked bodies
// are decoded in place, so one read gives one call whatever its chunks.
func (c *conn) takeBody(body func([]byte) error) (bool, error) {
	switch c.framing {
	case framingLength:
		k := min(c.left, int64(c.w-c.r))
		p := c.buf[c.r : c.r+int(k)]
		c.r += int(k)
		c.left -= k
		if err := body(p); err != nil {
			return false, err
		}
		return c.left == 0, nil
	case framingClose:
		p := c.buf[c.r:c.w]
		c.r = c.w
		return false, body(p)
	}
	start, out := c.r, c.r
	var bad error // a framing error, reported after the bytes before it
decode:
	for c.r < c.w && c.chunk != chunkDone {
		if c.chunk == chunkData {
			k := int(min(c.left, int64(c.w-c.r)))
			copy(c.buf[out:], c.buf[c.r:c.r+k])
			out += k
			c.r += k
			if c.left -= int64(k); c.left == 0 {
				c.chunk = chunkDataEnd
			}
			continue
		}
		line, ok := c.line()
		if !ok {
			break
		}
		switch c.chunk {
		case chunkSize:
			size, err := chunkLength(line)
			if err != nil {
				bad = err
				break decode
			}
			c.chunk, c.left = chunkData, size
			if size == 0 {
				c.chunk = chunkTrailer
			}
		case chunkDataEnd:
			if len(line) != 0 {
				bad = errors.New("engine sent chunk data longer than its size line said")
				break decode
			}
			c.chunk = chunkSize
		case chunkTrailer:
			if len(line) == 0 {
				c.chunk = chunkDone
			}
		}
	}
	if out > start {
		if err := body(c.buf[start:out]); err != nil {
			return false, err
		}
	}
	return c.chunk == chunkDone, bad
}

// line takes one line from c.buf[c.r:c.w], without its line break.
func (c *conn) line() ([]byte, bool) {
	i := bytes.IndexByte(c.buf[c.r:c.w], '\n')
	if i < 0 {
		return nil, false
	}
	line := c.buf[c.r : c.r+i]
	c.r += i + 1
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, true
}

// chunkLength reads a chunk's size line: hex digits, then maybe extensions.
func chunkLength(line []byte) (int64, error) {
	size := line
	if i := bytes.IndexByte(size, ';'); i >= 0 {
		size = bytes.TrimRight(size[:i], " \t") // whitespace may come before the extension
	}
	if len(size) == 0 || len(size) > 15 {
		return 0, fmt.Errorf("engine sent a bad chunk size line %q", truncate(line))
	}
	var n int64
	for _, ch := range size {
		var d byte
		switch {
		case '0' <= ch && ch <= '9':
			d = ch - '0'
		case 'a' <= ch && ch <= 'f':
			d = ch - 'a' + 10
		case 'A' <= ch && ch <= 'F':
			d = ch - 'A' + 10
		default:
			return 0, fmt.Errorf("engine sent a bad chunk size line %q", truncate(line))
		}
		n = n<<4 | int64(d)
	}
	return n, nil
}

func truncate(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
