package httplimit

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"time"
)

// Handler wraps h with the per-request limits of l: the body's read
// deadline, the per-write deadline and the large bodies' slots.
func Handler(h http.Handler, l Limits) http.Handler {
	return &limited{next: h, lim: l, large: make(chan struct{}, max(l.MaxLargeBodies, 1)), mem: newBudget(l.MaxBodyMemory)}
}

type limited struct {
	next  http.Handler
	lim   Limits
	large chan struct{}
	mem   *budget // nil: no byte budget
}

// takeoverKey is the context key under which a limited handler hands
// itself to a request that may take its connection over.
type takeoverKey struct{}

// Limited returns the limited handler that served r and its limits, for r
// of method PRI (HTTP/2's preface read as a request, which a gateway takes
// over to serve h2c): the server that then reads the connection's streams
// must serve them through it, under the same limits and body budget, or
// they would go around every limit of the listener. ok is false when r did
// not come through Handler.
func Limited(r *http.Request) (h http.Handler, l Limits, ok bool) {
	s, ok := r.Context().Value(takeoverKey{}).(*limited)
	if !ok {
		return nil, Limits{}, false
	}
	return s, s.lim, true
}

func (s *limited) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == "PRI" {
		r = r.WithContext(context.WithValue(r.Context(), takeoverKey{}, s))
	}
	rc := http.NewResponseController(w)
	var drain *largeBody // an HTTP/1 body that may be refused midway
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		// The deadline comes first: a request refused below leaves its body
		// unread, and net/http reads up to 256 KiB of it after the handler
		// to keep the connection; without a deadline a client that sends
		// none would keep the connection open for good.
		deadline := s.lim.BodyReadTimeout > 0 && rc.SetReadDeadline(time.Now().Add(s.lim.BodyReadTimeout)) == nil
		if r.ContentLength < 0 || r.ContentLength > s.lim.LargeBody {
			// A body that may be large takes a slot and its memory only as
			// its bytes arrive (largeBody): a client that declares a large
			// body, or starts one of unknown length, and then stalls holds
			// nothing but its connection. A declared length that cannot be
			// served now is still refused before a byte of it is read.
			h1 := r.ProtoMajor < 2
			if n := r.ContentLength; n > 0 {
				switch {
				case s.mem != nil && n > s.mem.size/BodyMemoryFactor:
					tooLarge(s.mem.size, n, false).answer(w, h1)
					return
				case len(s.large) == cap(s.large):
					noSlot(s.lim.LargeBody).answer(w, h1)
					return
				case s.mem != nil && !s.mem.fits(n):
					noMemory(s.mem.size).answer(w, h1)
					return
				}
			}
			lb := &largeBody{ReadCloser: r.Body, s: s, declared: r.ContentLength}
			r.Body = lb
			defer lb.release()
			w = &largeAnswer{ResponseWriter: w, body: lb, h1: h1}
			if h1 {
				drain = lb
			}
		}
		if deadline {
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
	}
	var pw *perWrite
	if s.lim.WriteTimeout > 0 {
		pw = &perWrite{ResponseWriter: w, rc: http.NewResponseController(w), d: s.lim.WriteTimeout}
		// The server writes what is buffered after the handler returns:
		// that write gets its own deadline too, unless the request is gone
		// (an HTTP/2 stream reset: a deadline set on it would keep a timer,
		// and the stream's memory, alive until it fires).
		defer func() {
			if r.Context().Err() == nil {
				pw.renew()
			}
		}()
		w = pw
	}
	s.next.ServeHTTP(w, r)
	if drain != nil {
		drain.drainRefused()
		// The refusal goes out after the drain: give its write the whole
		// WriteTimeout, even if the drain's read deadline ended the request.
		if pw != nil {
			pw.renew()
		}
	}
}

// deadlineBody clears the body's read deadline once the body has ended, so
// that a response longer than BodyReadTimeout is not cut: net/http then
// reads the connection in the background to notice the client leaving.
type deadlineBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	ended bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && !b.ended {
		b.ended = true
		if errors.Is(err, io.EOF) {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

// perWrite renews the connection's write deadline before each write and
// flush.
type perWrite struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *perWrite) renew() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *perWrite) Write(p []byte) (int, error) {
	w.renew()
	return w.ResponseWriter.Write(p)
}

func (w *perWrite) WriteHeader(code int) {
	w.renew()
	w.ResponseWriter.WriteHeader(code)
}

// Flush implements http.Flusher (handlers assert it).
func (w *perWrite) Flush() { _ = w.FlushError() }

// FlushError is what http.ResponseController calls.
func (w *perWrite) FlushError() error {
	w.renew()
	return w.rc.Flush()
}

// Hijack implements http.Hijacker: the connection is handed over with its
// deadlines cleared (its new owner, such as the gateway's h2c server,
// sets its own).
func (w *perWrite) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	nc, rw, err := w.rc.Hijack()
	if err == nil {
		_ = nc.SetDeadline(time.Time{})
	}
	return nc, rw, err
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *perWrite) Unwrap() http.ResponseWriter { return w.ResponseWriter }
