package gateway

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// Errors of the worker slots.
var (
	ErrNotQuarantined  = errors.New("gateway: worker is not quarantined")
	ErrLeasesNotDrain  = errors.New("gateway: worker still holds leases; fence after they drain")
	ErrBadSignature    = errors.New("gateway: fence answer has a bad signature")
	ErrStaleGeneration = errors.New("gateway: fence answer is for another quarantine generation")
	ErrReplayedNonce   = errors.New("gateway: fence answer does not answer the outstanding challenge")
	ErrUnknownWorker   = errors.New("gateway: no such worker")
	ErrUnknownRequest  = errors.New("gateway: request holds no permit and is not waiting")
)

// SlotsConfig bounds how much work each engine worker holds.
type SlotsConfig struct {
	// MaxInflightPerWorker is how many submissions a worker may hold at once.
	// A submission keeps its permit until every part of it finishes.
	MaxInflightPerWorker int `yaml:"max_inflight_per_worker" json:"max_inflight_per_worker"`
	// MaxWaitingRequests bounds the submissions waiting for a permit.
	MaxWaitingRequests int `yaml:"max_waiting_requests" json:"max_waiting_requests"`
}

// DefaultSlotsConfig matches the default engine profiles: 25 sequences per
// worker.
func DefaultSlotsConfig() SlotsConfig {
	return SlotsConfig{MaxInflightPerWorker: 25, MaxWaitingRequests: 100}
}

// Validate reports what is wrong with a configuration.
func (c SlotsConfig) Validate() error {
	var errs []error
	if c.MaxInflightPerWorker < 1 {
		errs = append(errs, fmt.Errorf("max_inflight_per_worker must be >= 1, got %d", c.MaxInflightPerWorker))
	}
	if c.MaxWaitingRequests < 0 {
		errs = append(errs, fmt.Errorf("max_waiting_requests must be >= 0, got %d", c.MaxWaitingRequests))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway slots: %w", err)
	}
	return nil
}

// Outcome says how a submission ended.
type Outcome uint8

// Outcomes.
const (
	// Completed: the worker is known to be done with it (finished, failed
	// cleanly, or cancelled before it was sent).
	Completed Outcome = iota + 1
	// Uncertain: the request was sent and the connection was lost or timed
	// out, so the worker may still be running it.
	Uncertain
)

// Grant hands a permit on a worker to a submission.
type Grant struct {
	ID     uint64
	Worker int
}

// Challenge asks a quarantined worker to state that it is idle.
type Challenge struct {
	Worker     int
	Generation uint64
	Nonce      [16]byte
	Signature  [32]byte
}

// IdleStatement is a worker's signed answer: idle at this generation.
type IdleStatement struct {
	Worker     int
	Generation uint64
	Nonce      [16]byte
	Signature  [32]byte
}

// FenceCounts count fence answers the slots rejected, by reason.
type FenceCounts struct {
	Recovered, BadSignature, StaleGeneration, Replayed uint64
}

type slotWorker struct {
	inflight    int
	quarantined bool
	generation  uint64
	challenge   *Challenge
	used        map[[16]byte]bool // nonces already answered or superseded
}

// Slots hands out per-worker submission permits, queues what does not fit,
// quarantines a worker after an uncertain completion and restores it only
// after its leases drain and an authenticated idle fence succeeds. A health
// check alone never restores capacity.
//
// Slots is a core: it reads no clock and draws no randomness (the caller
// brings fresh nonces). It is not safe for concurrent use.
type Slots struct {
	cfg     SlotsConfig
	key     []byte
	workers []slotWorker
	waiting []uint64
	held    map[uint64]int // submission -> worker
	fence   FenceCounts
	quar    uint64
}

// NewSlots returns the slots of n workers; key signs and checks fences.
func NewSlots(n int, cfg SlotsConfig, key []byte) (*Slots, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if n < 1 {
		return nil, fmt.Errorf("gateway slots: need at least one worker, got %d", n)
	}
	if len(key) < 16 {
		return nil, fmt.Errorf("gateway slots: fence key must be at least 16 bytes, got %d", len(key))
	}
	s := &Slots{cfg: cfg, key: slices.Clone(key), workers: make([]slotWorker, n), held: make(map[uint64]int)}
	for i := range s.workers {
		s.workers[i].used = make(map[[16]byte]bool)
	}
	return s, nil
}

func (s *Slots) available(w int) bool {
	return !s.workers[w].quarantined && s.workers[w].inflight < s.cfg.MaxInflightPerWorker
}

// freeWorker picks prefer if it can take a submission, else the available
// worker with the fewest in flight (lowest index on ties), else -1.
func (s *Slots) freeWorker(prefer int) int {
	if prefer >= 0 && prefer < len(s.workers) && s.available(prefer) {
		return prefer
	}
	best := -1
	for w := range s.workers {
		if s.available(w) && (best < 0 || s.workers[w].inflight < s.workers[best].inflight) {
			best = w
		}
	}
	return best
}

// Acquire asks for a permit for submission id, on worker prefer if it can
// take it (-1: no preference). It returns the grant, or queued = true, or an
// error wrapping ErrOverloaded when the waiting queue is full.
func (s *Slots) Acquire(id uint64, prefer int) (g Grant, queued bool, err error) {
	if _, dup := s.held[id]; dup || slices.Contains(s.waiting, id) {
		return Grant{}, false, fmt.Errorf("gateway slots: submission %d already admitted", id)
	}
	if len(s.waiting) == 0 {
		if w := s.freeWorker(prefer); w >= 0 {
			return s.grant(id, w), false, nil
		}
	}
	if len(s.waiting) >= s.cfg.MaxWaitingRequests {
		return Grant{}, false, fmt.Errorf("%w: %d submissions already wait for a worker slot", ErrOverloaded, len(s.waiting))
	}
	s.waiting = append(s.waiting, id)
	return Grant{}, true, nil
}

func (s *Slots) grant(id uint64, w int) Grant {
	s.workers[w].inflight++
	s.held[id] = w
	return Grant{ID: id, Worker: w}
}

// wake hands free permits to waiting submissions, oldest first.
func (s *Slots) wake(out []Grant) []Grant {
	for len(s.waiting) > 0 {
		w := s.freeWorker(-1)
		if w < 0 {
			break
		}
		id := s.waiting[0]
		s.waiting = s.waiting[1:]
		out = append(out, s.grant(id, w))
	}
	return out
}

// Release returns submission id's permit when every part of it has ended.
// An Uncertain outcome quarantines its worker. Submissions woken into freed
// permits are returned.
func (s *Slots) Release(id uint64, o Outcome) ([]Grant, error) {
	if o != Completed && o != Uncertain {
		return nil, fmt.Errorf("gateway slots: release of %d with outcome %d: want Completed or Uncertain", id, o)
	}
	w, ok := s.held[id]
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownRequest, id)
	}
	delete(s.held, id)
	s.workers[w].inflight--
	if o == Uncertain {
		s.quarantine(w)
	}
	return s.wake(nil), nil
}

// Cancel withdraws a submission that is waiting, or that holds a permit it
// has not used (its request was never sent): the permit passes to the next
// waiter, so a permit handed to a waiter that gives up at that moment is not
// lost. A submission whose request was sent must end through Release.
func (s *Slots) Cancel(id uint64) ([]Grant, error) {
	if i := slices.Index(s.waiting, id); i >= 0 {
		s.waiting = slices.Delete(s.waiting, i, i+1)
		return nil, nil
	}
	return s.Release(id, Completed)
}

func (s *Slots) quarantine(w int) {
	sw := &s.workers[w]
	if sw.quarantined {
		return
	}
	sw.quarantined = true
	sw.generation++
	if sw.challenge != nil {
		sw.used[sw.challenge.Nonce] = true
		sw.challenge = nil
	}
	s.quar++
}

// Quarantined reports whether worker w is quarantined.
func (s *Slots) Quarantined(w int) bool { return s.workers[w].quarantined }

// Inflight is the number of permits worker w holds.
func (s *Slots) Inflight(w int) int { return s.workers[w].inflight }

// Waiting is the number of submissions waiting for a permit.
func (s *Slots) Waiting() int { return len(s.waiting) }

// Fences counts fence outcomes; Quarantines counts quarantines begun.
func (s *Slots) Fences() FenceCounts { return s.fence }

// Quarantines counts quarantines begun.
func (s *Slots) Quarantines() uint64 { return s.quar }

// Challenge starts an idle fence of quarantined worker w with a fresh nonce
// from the caller. The worker must hold no lease. A new challenge supersedes
// the previous one.
func (s *Slots) Challenge(w int, nonce [16]byte) (Challenge, error) {
	if w < 0 || w >= len(s.workers) {
		return Challenge{}, fmt.Errorf("%w: %d", ErrUnknownWorker, w)
	}
	sw := &s.workers[w]
	if !sw.quarantined {
		return Challenge{}, fmt.Errorf("worker %d: %w", w, ErrNotQuarantined)
	}
	if sw.inflight > 0 {
		return Challenge{}, fmt.Errorf("worker %d (%d leases): %w", w, sw.inflight, ErrLeasesNotDrain)
	}
	if sw.used[nonce] || (sw.challenge != nil && sw.challenge.Nonce == nonce) {
		return Challenge{}, fmt.Errorf("worker %d: nonce already used; bring a fresh one", w)
	}
	if sw.challenge != nil {
		sw.used[sw.challenge.Nonce] = true // superseded
	}
	c := Challenge{Worker: w, Generation: sw.generation, Nonce: nonce}
	c.Signature = sign(s.key, "fence", w, c.Generation, nonce)
	sw.challenge = &c
	return c, nil
}

// Fence checks a worker's idle statement. A good one for the outstanding
// challenge ends the quarantine and wakes waiting submissions; a bad
// signature, a stale generation or an answer to any other challenge is
// rejected and counted.
func (s *Slots) Fence(st IdleStatement) ([]Grant, error) {
	if st.Worker < 0 || st.Worker >= len(s.workers) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownWorker, st.Worker)
	}
	sw := &s.workers[st.Worker]
	want := sign(s.key, "idle", st.Worker, st.Generation, st.Nonce)
	if !hmac.Equal(want[:], st.Signature[:]) {
		s.fence.BadSignature++
		return nil, fmt.Errorf("worker %d: %w", st.Worker, ErrBadSignature)
	}
	if !sw.quarantined || st.Generation != sw.generation {
		s.fence.StaleGeneration++
		return nil, fmt.Errorf("worker %d: answer for generation %d, worker at %d (quarantined %v): %w",
			st.Worker, st.Generation, sw.generation, sw.quarantined, ErrStaleGeneration)
	}
	if sw.challenge == nil || sw.challenge.Nonce != st.Nonce {
		s.fence.Replayed++
		return nil, fmt.Errorf("worker %d: %w", st.Worker, ErrReplayedNonce)
	}
	if sw.inflight > 0 {
		return nil, fmt.Errorf("worker %d (%d leases): %w", st.Worker, sw.inflight, ErrLeasesNotDrain)
	}
	sw.used[st.Nonce] = true
	sw.challenge = nil
	sw.quarantined = false
	s.fence.Recovered++
	return s.wake(nil), nil
}

// OperatorRelease ends a quarantine without a fence, for engines that do not
// implement it; the caller must have authenticated the operator.
func (s *Slots) OperatorRelease(w int) ([]Grant, error) {
	if w < 0 || w >= len(s.workers) {
		return nil, fmt.Errorf("%w: %d", ErrUnknownWorker, w)
	}
	sw := &s.workers[w]
	if !sw.quarantined {
		return nil, fmt.Errorf("worker %d: %w", w, ErrNotQuarantined)
	}
	if sw.challenge != nil {
		sw.used[sw.challenge.Nonce] = true
		sw.challenge = nil
	}
	sw.quarantined = false
	return s.wake(nil), nil
}

// SignIdle is what a worker that implements the fence answers to c: a
// statement, signed with the shared key, that it is idle at c's generation.
func SignIdle(key []byte, c Challenge) IdleStatement {
	return IdleStatement{Worker: c.Worker, Generation: c.Generation, Nonce: c.Nonce,
		Signature: sign(key, "idle", c.Worker, c.Generation, c.Nonce)}
}

// VerifyChallenge lets a worker check that a challenge came from a gateway
// holding the key.
func VerifyChallenge(key []byte, c Challenge) bool {
	want := sign(key, "fence", c.Worker, c.Generation, c.Nonce)
	return hmac.Equal(want[:], c.Signature[:])
}

// sign is HMAC-SHA256 over a purpose label, the worker id, the generation and
// the nonce, so that a challenge can never pass for an answer.
func sign(key []byte, purpose string, w int, gen uint64, nonce [16]byte) [32]byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(purpose))
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], uint64(w))
	binary.BigEndian.PutUint64(buf[8:], gen)
	m.Write(buf[:])
	m.Write(nonce[:])
	var out [32]byte
	copy(out[:], m.Sum(nil))
	return out
}
