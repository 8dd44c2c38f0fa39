package gateway

import "time"

const (
	tpsBucket = 250 * time.Millisecond
	// tpsRing holds the longest window plus the bucket being filled.
	tpsRing = 240 + 1
)

// tpsWindows are the sliding windows in buckets, shortest first (5, 20, 60 s).
var tpsWindows = [...]int{20, 80, 240}

// tpsMeter keeps input tokens, request counts and engine-slot seconds (each
// finished request's admitted-to-finished time) in a ring of buckets. A
// window covers the complete buckets before the one being filled, so its rate
// never reads low for a bucket not yet full; running sums per window make a
// rate cost O(windows), not O(buckets).
type tpsMeter struct {
	minRequests int
	tokens      [tpsRing]float64
	requests    [tpsRing]int
	slotSec     [tpsRing]float64
	sumTokens   [len(tpsWindows)]float64
	sumRequests [len(tpsWindows)]int
	sumSlotSec  [len(tpsWindows)]float64
	cur         int64 // index of the bucket being filled
}

func newTPSMeter(minRequests int) tpsMeter { return tpsMeter{minRequests: minRequests} }

// advance moves to the bucket of now: each bucket passed becomes complete and
// enters every window, and the bucket that falls out of a window leaves it.
func (m *tpsMeter) advance(now time.Duration) {
	idx := int64(now / tpsBucket)
	if idx <= m.cur {
		return
	}
	if idx-m.cur > int64(tpsWindows[len(tpsWindows)-1]) {
		*m = tpsMeter{minRequests: m.minRequests, cur: idx}
		return
	}
	for b := m.cur + 1; b <= idx; b++ {
		done := b - 1
		for w, n := range tpsWindows {
			m.sumTokens[w] += m.tokens[done%tpsRing]
			m.sumRequests[w] += m.requests[done%tpsRing]
			m.sumSlotSec[w] += m.slotSec[done%tpsRing]
			if old := done - int64(n); old >= 0 {
				m.sumTokens[w] -= m.tokens[old%tpsRing]
				m.sumRequests[w] -= m.requests[old%tpsRing]
				m.sumSlotSec[w] -= m.slotSec[old%tpsRing]
			}
		}
		m.tokens[b%tpsRing], m.requests[b%tpsRing], m.slotSec[b%tpsRing] = 0, 0, 0
	}
	m.cur = idx
}

// add records a finished request of tokens input tokens that held an
// engine slot for slot.
func (m *tpsMeter) add(now time.Duration, tokens int, slot time.Duration) {
	m.advance(now)
	i := m.cur % tpsRing
	m.tokens[i] += float64(tokens)
	m.requests[i]++
	m.slotSec[i] += max(slot, 0).Seconds()
}

// rate is the largest rate over the windows that hold enough requests, or the
// longest window's rate if none does (then counted is false). A window longer
// than the complete buckets so far is divided by their span.
func (m *tpsMeter) rate(now time.Duration) (r float64, counted bool) {
	m.advance(now)
	if m.cur == 0 {
		return 0, false
	}
	best := 0.0
	for w, n := range tpsWindows {
		r := m.sumTokens[w] / m.span(n).Seconds()
		if m.sumRequests[w] >= m.minRequests {
			best, counted = max(best, r), true
		}
	}
	if !counted {
		last := len(tpsWindows) - 1
		return m.sumTokens[last] / m.span(tpsWindows[last]).Seconds(), false
	}
	return best, true
}

func (m *tpsMeter) span(n int) time.Duration {
	return time.Duration(min(int64(n), m.cur)) * tpsBucket
}

// perSlot is the input tokens per engine-slot second over the fallback
// (longest) window: the tokens of the requests that finished in it divided
// by the slot time they held. It counts only once the window holds enough
// requests.
func (m *tpsMeter) perSlot(now time.Duration) (r float64, counted bool) {
	m.advance(now)
	last := len(tpsWindows) - 1
	if m.sumRequests[last] < m.minRequests || m.sumSlotSec[last] <= 0 {
		return 0, false
	}
	return m.sumTokens[last] / m.sumSlotSec[last], true
}
