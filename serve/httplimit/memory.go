package httplimit

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

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

// ErrBodyMemory is what reading a body of unknown length returns once the
// listener's budget for large bodies (MaxBodyMemory) is spent; the request
// is then answered 503 with Retry-After, whatever its handler writes.
var ErrBodyMemory = errors.New("httplimit: the server holds as many large request bodies as it takes at once; retry")

// memoryStep is how much of the budget a body of unknown length takes at a
// time, as it arrives: 1 MiB of body.
const memoryStep = 1 << 20

// budget is a listener's memory for large bodies: bytes of body times
// BodyMemoryFactor, taken without waiting (TryAcquire) and given back when
// the request ends.
type budget struct {
	sem  *semaphore.Weighted
	size int64
}

func newBudget(size int64) *budget {
	if size <= 0 {
		return nil
	}
	return &budget{sem: semaphore.NewWeighted(size), size: size}
}

// take reserves the budget of a body of declared length n: ok false and
// the status to answer (503, or 413 for a body the whole budget cannot
// hold) when it cannot.
func (b *budget) take(n int64) (cost int64, status int, ok bool) {
	cost = n * BodyMemoryFactor
	if n > b.size/BodyMemoryFactor {
		return 0, http.StatusRequestEntityTooLarge, false
	}
	if !b.sem.TryAcquire(cost) {
		return 0, http.StatusServiceUnavailable, false
	}
	return cost, 0, true
}

// refuseMemory answers a request whose body the budget cannot take now
// (503, Retry-After) or ever (413), before any byte of it is read.
func refuseMemory(w http.ResponseWriter, status int, size, n int64) {
	w.Header().Set("Connection", "close")
	if status == http.StatusRequestEntityTooLarge {
		http.Error(w, fmt.Sprintf("a request body of %d bytes is more than this server holds (--max-body-memory %d bytes, %d per byte of body)", n, size, BodyMemoryFactor), status)
		return
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "the server holds as many large request bodies as its memory for them allows (--max-body-memory "+strconv.FormatInt(size, 10)+" bytes); retry", status)
}

// meteredBody takes the budget of a body of unknown length as it arrives,
// about memoryStep at a time; once the budget is spent its reads fail with
// ErrBodyMemory.
type meteredBody struct {
	io.ReadCloser
	b       *budget
	read    int64
	taken   int64 // of the budget
	refused bool

	mu sync.Mutex // release may run after a Read on another goroutine
}

func (m *meteredBody) Read(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refused {
		return 0, ErrBodyMemory
	}
	n, err := m.ReadCloser.Read(p)
	m.read += int64(n)
	// The handler keeps what it reads: charge it, a step ahead (memoryStep,
	// or an eighth of the budget if less), or just what it needs.
	if need := m.read * BodyMemoryFactor; need > m.taken {
		step := max(need-m.taken, min(memoryStep*BodyMemoryFactor, m.b.size/8))
		if !m.b.sem.TryAcquire(step) {
			step = need - m.taken
			if !m.b.sem.TryAcquire(step) {
				m.refused = true
				return 0, ErrBodyMemory
			}
		}
		m.taken += step
	}
	return n, err
}

// release gives the budget back, once the request ended.
func (m *meteredBody) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.taken > 0 {
		m.b.sem.Release(m.taken)
		m.taken = 0
	}
	m.refused = true // a late read takes nothing more
}

func (m *meteredBody) wasRefused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.refused
}

// memoryAnswer turns the answer to a request whose body the budget refused
// midway into 503 with Retry-After, whatever status its handler chose (it
// saw a read error, and would say 400).
type memoryAnswer struct {
	http.ResponseWriter
	body  *meteredBody
	wrote bool
}

func (w *memoryAnswer) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if w.body.wasRefused() && code < http.StatusInternalServerError {
			w.Header().Set("Retry-After", "1")
			w.Header().Set("Connection", "close")
			code = http.StatusServiceUnavailable
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *memoryAnswer) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (w *memoryAnswer) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *memoryAnswer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
