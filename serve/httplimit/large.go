package httplimit

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/semaphore"
)

// BodyMemoryFactor is what a large body of n bytes is charged against
// MaxBodyMemory: n times this. Measured on the router's and gateway's path
// (openai.ReadBody, then encoding/json into openai.Request, then the prompt's
// text; TestBodyMemoryFactor): while a request is served, an 8 MiB body of
// 4,000 messages keeps about 2.1 times its size alive (the body, its
// messages' raw copies, the prompt text) and leaves about 13 times its
// size of garbage behind its parsing, which the collector lets grow to the
// live heap's size again (GOGC 100) before it runs: 2 times 2.
const BodyMemoryFactor = 4

// ErrBodyMemory is what reading a large body returns once the listener's
// budget for large bodies (MaxBodyMemory) is spent; the request is then
// answered 503 with Retry-After in place of its handler's answer (unless
// the handler had already written its header, or answers 5xx).
var ErrBodyMemory = errors.New("httplimit: the server holds as many large request bodies as its memory for them allows; retry")

// ErrLargeBodies is what reading a body returns when it grows past
// LargeBody while MaxLargeBodies large bodies are being served; the
// request is then answered 503 with Retry-After in place of its handler's
// answer (unless the handler had already written its header, or answers
// 5xx).
var ErrLargeBodies = errors.New("httplimit: the server serves as many large request bodies as it takes at once; retry")

// memoryStep is how much of the budget a large body takes at a time, as
// it arrives: 1 MiB of body.
const memoryStep = 1 << 20

// budget is a listener's memory for large bodies: bytes of body times
// BodyMemoryFactor, taken without waiting (TryAcquire) and given back when
// the request ends.
type budget struct {
	sem  *semaphore.Weighted
	size int64
	used atomic.Int64 // what sem has given out, for fits
}

func newBudget(size int64) *budget {
	if size <= 0 {
		return nil
	}
	return &budget{sem: semaphore.NewWeighted(size), size: size}
}

// tryTake takes cost of the budget, if it is there.
func (b *budget) tryTake(cost int64) bool {
	if !b.sem.TryAcquire(cost) {
		return false
	}
	b.used.Add(cost)
	return true
}

func (b *budget) give(cost int64) {
	b.used.Add(-cost)
	b.sem.Release(cost)
}

// fits says whether a body of declared length n would fit in what is left
// of the budget now; it takes nothing (the body takes its memory as it
// arrives), so a body it let in may still be refused midway.
func (b *budget) fits(n int64) bool {
	return b.used.Load()+n*BodyMemoryFactor <= b.size
}

// refusal is why a large body is not served: no slot free, no memory
// left, or more than the whole memory can hold.
type refusal struct {
	status int    // 503 (retry) or 413
	msg    string // the answer's text
	err    error  // what a body refused midway returns to its reader
}

func noSlot(large int64) refusal {
	return refusal{http.StatusServiceUnavailable, "too many large request bodies at once (over " + strconv.FormatInt(large, 10) + " bytes); retry", ErrLargeBodies}
}

func noMemory(size int64) refusal {
	return refusal{http.StatusServiceUnavailable, "the server holds as many large request bodies as its memory for them allows (--max-body-memory " + strconv.FormatInt(size, 10) + " bytes); retry", ErrBodyMemory}
}

// tooLarge: a body of n bytes (or, with sofar, of which n have arrived),
// more than the whole budget holds.
func tooLarge(size, n int64, sofar bool) refusal {
	of := "of " + strconv.FormatInt(n, 10) + " bytes"
	if sofar {
		of = "of unknown length (" + strconv.FormatInt(n, 10) + " bytes so far)"
	}
	return refusal{http.StatusRequestEntityTooLarge, fmt.Sprintf("a request body %s is more than this server holds (--max-body-memory %d bytes, %d per byte of body)", of, size, BodyMemoryFactor), errTooLarge}
}

// answer writes the refusal as the request's whole answer. An HTTP/1
// connection is closed after it (the rest of the body is left unread, or,
// refused midway, read and thrown away first: drainRefused); an HTTP/2
// connection is not, so that the other streams of a router's shared
// connection go on.
func (f refusal) answer(w http.ResponseWriter, h1 bool) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	if h1 {
		h.Set("Connection", "close")
	}
	if f.status == http.StatusServiceUnavailable {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(f.status)
	_, _ = io.WriteString(w, f.msg+"\n")
}

// largeBody is a body that may be large: one of declared length above
// LargeBody or of unknown length. Once more than LargeBody bytes of it
// have arrived it takes one of the listener's MaxLargeBodies slots, and
// from then on BodyMemoryFactor times its bytes of the memory budget,
// about memoryStep at a time (never more than its declared length's
// worth); when either is not there its reads fail (ErrLargeBodies,
// ErrBodyMemory, errTooLarge) and largeAnswer answers with the refusal.
// Until then it holds neither, so a client that stalls before sending a
// large body's bytes keeps nobody else's large body out.
type largeBody struct {
	io.ReadCloser
	s        *limited
	declared int64 // the declared length; -1 for unknown
	read     int64
	slot     bool  // holds one of s.large
	taken    int64 // of the budget
	released bool  // the request ended: reads return errReleased

	// why is the refusal, once there is one (reads then return its err):
	// read by largeAnswer without mu, which a Read holds while it waits for
	// the client (a handler may answer while another goroutine reads).
	why atomic.Pointer[refusal]

	mu sync.Mutex // release may run after a Read on another goroutine
}

// errReleased is what a read returns after the request ended.
var errReleased = errors.New("httplimit: body read after its request ended")

// errTooLarge is what reading a body of unknown length returns once it is
// more than the whole memory budget holds; the answer is then 413.
var errTooLarge = errors.New("httplimit: the request body is more than this server holds (--max-body-memory)")

// refuse records why the body is refused; reads return f.err from now on.
func (m *largeBody) refuse(f refusal) (int, error) {
	m.why.Store(&f)
	return 0, f.err
}

func (m *largeBody) Read(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if f := m.why.Load(); f != nil {
		return 0, f.err
	}
	if m.released {
		return 0, errReleased
	}
	n, err := m.ReadCloser.Read(p)
	m.read += int64(n)
	if m.read <= m.s.lim.LargeBody {
		return n, err
	}
	if !m.slot {
		select {
		case m.s.large <- struct{}{}:
			m.slot = true
		default:
			return m.refuse(noSlot(m.s.lim.LargeBody))
		}
	}
	// The handler keeps what it reads: charge it, a step ahead (memoryStep,
	// or an eighth of the budget if less, or what is left of a declared
	// length), or just what it needs.
	if b := m.s.mem; b != nil {
		if need := m.read * BodyMemoryFactor; need > b.size {
			return m.refuse(tooLarge(b.size, m.read, true))
		} else if need > m.taken {
			ahead := min(memoryStep*BodyMemoryFactor, b.size/8)
			if m.declared > 0 {
				ahead = min(ahead, m.declared*BodyMemoryFactor-m.taken)
			}
			step := max(need-m.taken, ahead)
			if !b.tryTake(step) {
				step = need - m.taken
				if !b.tryTake(step) {
					return m.refuse(noMemory(b.size))
				}
			}
			m.taken += step
		}
	}
	return n, err
}

// release gives the slot and the budget back, once the request ended.
func (m *largeBody) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.taken > 0 {
		m.s.mem.give(m.taken)
		m.taken = 0
	}
	if m.slot {
		<-m.s.large
		m.slot = false
	}
	m.released = true // a late read takes nothing more
}

// maxDrain bounds what is read and thrown away of a body refused midway
// (drainRefused): 16 MiB, twice the largest body a router or gateway takes.
const maxDrain = 16 << 20

// drainRefused, once the handler has returned, gives the slot and memory
// back and, if the body was refused midway, reads the rest of it (up to
// maxDrain, within the body's read deadline, which a refusal leaves set)
// into a small buffer and throws it away. An HTTP/1 client writes its
// whole body before it reads the answer: closing the connection under it
// would reset the connection and lose the answer. It takes neither slot
// nor memory.
func (m *largeBody) drainRefused() {
	m.release()
	if m.why.Load() != nil {
		_, _ = io.CopyBuffer(io.Discard, io.LimitReader(m.ReadCloser, maxDrain), make([]byte, 32<<10))
	}
}

// largeAnswer replaces the answer to a request whose body was refused
// midway (no slot, no memory, or more than the memory holds) with the
// refusal (503 with Retry-After, or 413) in place of its handler's (which
// saw a read error, and would say 400), unless the handler answers 5xx or
// had written its header before the refusal.
type largeAnswer struct {
	http.ResponseWriter
	body     *largeBody
	h1       bool
	wrote    bool
	replaced bool // the refusal was written; the handler's writes are dropped
}

func (w *largeAnswer) WriteHeader(code int) {
	if w.replaced {
		return
	}
	if !w.wrote {
		w.wrote = true
		if f := w.body.why.Load(); f != nil && code < http.StatusInternalServerError {
			w.replaced = true
			f.answer(w.ResponseWriter, w.h1)
			return
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *largeAnswer) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (w *largeAnswer) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *largeAnswer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
