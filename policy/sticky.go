package policy

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// StickyParams separate where new work goes from where existing sessions
// stay, under the pressure policy. A session the router has placed before
// (within TTL) keeps the backend it was last dispatched to, which holds its
// prefix cache, whatever the weights do; the weights place new sessions,
// sessions the table has forgotten, and sessions whose backend must be left.
// A session leaves its backend when the backend is not eligible or already
// refused the request, is failing (its error pressure full), has a pressure
// score above MoveScore, or, when RePrefillTPS is set, when the time its
// turn is expected to wait there beyond the best other backend's exceeds a
// full re-prefill of its context elsewhere (see Pressure).
type StickyParams struct {
	// Sessions bounds the table of sessions per router; 0 turns stickiness
	// off (every turn is placed by the weights).
	Sessions int `yaml:"sessions" json:"sessions"`
	// TTL is how long a session unseen is remembered: after it the
	// backend's prefix cache is likely gone and the weights place the
	// session afresh.
	TTL time.Duration `yaml:"ttl" json:"ttl"`
	// MoveScore is the pressure score (0-1] above which a backend's
	// sessions leave it; 1 never moves them for the score alone (only
	// failure, ineligibility or the cost comparison do).
	MoveScore float64 `yaml:"move_score" json:"move_score"`
	// RePrefillTPS is the rate, in prompt tokens a second, at which a
	// backend prefills a session's context that it does not hold: the cost
	// of moving a session is its tokens over this rate. 0 turns the cost
	// comparison off (only MoveScore and failure move sessions).
	RePrefillTPS float64 `yaml:"reprefill_tps" json:"reprefill_tps"`
}

// DefaultStickyParams are the hand-set start of the tuning search: up to
// 65,536 sessions a router for 60 s (the routing study's turns come an
// exponential 5 s apart on average), a session moved only from a backend at
// a score above 0.9. The tuned defaults (DefaultPressureParams) keep the
// table and set MoveScore to 1.
func DefaultStickyParams() StickyParams {
	return StickyParams{Sessions: 1 << 16, TTL: 60 * time.Second, MoveScore: 0.9}
}

// MaxStickySessions bounds StickyParams.Sessions (a table of about 40 MB).
const MaxStickySessions = 1 << 20

// Validate reports what is wrong with the parameters.
func (sp StickyParams) Validate() error {
	var errs []error
	if sp.Sessions < 0 || sp.Sessions == 1 || sp.Sessions > MaxStickySessions {
		errs = append(errs, fmt.Errorf("sessions must be 0 (off) or between 2 and %d (two generations of half the bound each), got %d", MaxStickySessions, sp.Sessions))
	}
	if sp.Sessions > 0 && sp.TTL <= 0 {
		errs = append(errs, fmt.Errorf("ttl must be > 0 when sessions is set, got %v", sp.TTL))
	}
	if !(sp.MoveScore > 0 && sp.MoveScore <= 1) {
		errs = append(errs, fmt.Errorf("move_score must be in (0,1], got %v", sp.MoveScore))
	}
	if !(sp.RePrefillTPS >= 0) || math.IsInf(sp.RePrefillTPS, 0) {
		errs = append(errs, fmt.Errorf("reprefill_tps must be a finite number >= 0 (0: no cost comparison), got %v", sp.RePrefillTPS))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sticky: %w", err)
	}
	return nil
}

// stickyEntry is a session's backend (by its stable key) and when the
// session was last dispatched.
type stickyEntry struct {
	key  uint64
	last time.Duration
}

// stickyTable maps sessions to the backend they were last dispatched to.
// It is bounded and aged by generations: entries go to cur; when cur has
// been filling for TTL or holds half the bound, it becomes old and old is
// dropped. An entry therefore lives at least TTL unless the bound forces it
// out earlier, and the table never holds more than the bound. Lookups check
// the age exactly. No iteration over the maps, so the table is as
// deterministic as its inputs.
type stickyTable struct {
	cur, old map[uint64]stickyEntry
	since    time.Duration // when cur started filling
	half     int
	ttl      time.Duration
}

func newStickyTable(sp StickyParams) *stickyTable {
	if sp.Sessions <= 0 {
		return nil
	}
	return &stickyTable{cur: map[uint64]stickyEntry{}, old: map[uint64]stickyEntry{}, half: max(sp.Sessions/2, 1), ttl: sp.TTL}
}

// get returns the backend key session was last dispatched to, if within TTL.
func (t *stickyTable) get(now time.Duration, session uint64) (uint64, bool) {
	e, ok := t.cur[session]
	if !ok {
		e, ok = t.old[session]
	}
	if !ok || now-e.last > t.ttl {
		return 0, false
	}
	return e.key, true
}

// put records that session was dispatched to the backend of key at now.
func (t *stickyTable) put(now time.Duration, session, key uint64) {
	if _, ok := t.cur[session]; !ok && (now-t.since >= t.ttl || len(t.cur) >= t.half) {
		t.old, t.cur = t.cur, t.old
		clear(t.cur)
		t.since = now
	}
	t.cur[session] = stickyEntry{key: key, last: now}
}

// len is the number of entries held (live or not yet dropped).
func (t *stickyTable) len() int { return len(t.cur) + len(t.old) }
