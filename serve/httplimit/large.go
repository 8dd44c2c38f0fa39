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
// answered 503 with Retry-After, whatever its handler writes.
var ErrBodyMemory = errors.New("httplimit: the server holds as many large request bodies as its memory for them allows; retry")

// ErrLargeBodies is what reading a body returns when it grows past
// LargeBody while MaxLargeBodies large bodies are being served; the
// request is then answered 503 with Retry-After, whatever its handler
// writes.
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

// refuseLarge answers a request of declared large length while every
// large body's slot is taken, before any byte of its body is read.
func refuseLarge(w http.ResponseWriter, large int64) {
	w.Header().Set("Retry-After", "1")
	w.Header().Set("Connection", "close")
	http.Error(w, "too many large request bodies at once (over "+strconv.FormatInt(large, 10)+" bytes); retry", http.StatusServiceUnavailable)
}

// largeBody is a body that may be large: one of declared length above
// LargeBody or of unknown length. Once more than LargeBody bytes of it
// have arrived it takes one of the listener's MaxLargeBodies slots, and
// from then on BodyMemoryFactor times its bytes of the memory budget,
// about memoryStep at a time; when either is not there its reads fail
// (ErrLargeBodies, ErrBodyMemory) and largeAnswer turns the answer into
// 503. Until then it holds neither, so a client that stalls before
// sending a large body's bytes keeps nobody else's large body out.
type largeBody struct {
	io.ReadCloser
	s       *limited
	read    int64
	slot    bool  // holds one of s.large
	taken   int64 // of the budget
	refused error // ErrLargeBodies or ErrBodyMemory; errReleased after release

	mu sync.Mutex // release may run after a Read on another goroutine
}

// errReleased is what a read returns after the request ended.
var errReleased = errors.New("httplimit: body read after its request ended")

func (m *largeBody) Read(p []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refused != nil {
		return 0, m.refused
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
			m.refused = ErrLargeBodies
			return 0, m.refused
		}
	}
	// The handler keeps what it reads: charge it, a step ahead (memoryStep,
	// or an eighth of the budget if less), or just what it needs.
	if b := m.s.mem; b != nil {
		if need := m.read * BodyMemoryFactor; need > m.taken {
			step := max(need-m.taken, min(memoryStep*BodyMemoryFactor, b.size/8))
			if !b.tryTake(step) {
				step = need - m.taken
				if !b.tryTake(step) {
					m.refused = ErrBodyMemory
					return 0, m.refused
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
	if m.refused == nil {
		m.refused = errReleased // a late read takes nothing more
	}
}

// wasRefused says whether a slot or the budget refused the body.
func (m *largeBody) wasRefused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return errors.Is(m.refused, ErrLargeBodies) || errors.Is(m.refused, ErrBodyMemory)
}

// largeAnswer turns the answer to a request whose body was refused midway
// (no slot, or no budget) into 503 with Retry-After, whatever status its
// handler chose (it saw a read error, and would say 400).
type largeAnswer struct {
	http.ResponseWriter
	body  *largeBody
	wrote bool
}

func (w *largeAnswer) WriteHeader(code int) {
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

func (w *largeAnswer) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
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
