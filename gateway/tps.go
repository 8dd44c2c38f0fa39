package gateway

import "time"

const (
	tpsBucket  = 250 * time.Millisecond
	tpsBuckets = 240 // 60 s
)

// tpsWindows are the sliding windows in buckets, shortest first.
var tpsWindows = [...]int{20, 80, 240}

// tpsMeter keeps input tokens and request counts in a ring of buckets with a
// running sum per window, so a rate costs O(windows), not O(buckets).
type tpsMeter struct {
	minRequests int
	tokens      [tpsBuckets]float64
	requests    [tpsBuckets]int
	sumTokens   [len(tpsWindows)]float64
	sumRequests [len(tpsWindows)]int
	cur         int64 // index of the current bucket
}

func newTPSMeter(minRequests int) tpsMeter { return tpsMeter{minRequests: minRequests} }

func (m *tpsMeter) advance(now time.Duration) {
	idx := int64(now / tpsBucket)
	if idx <= m.cur {
		return
	}
	if idx-m.cur >= tpsBuckets {
		*m = tpsMeter{minRequests: m.minRequests, cur: idx}
		return
	}
	for b := m.cur + 1; b <= idx; b++ {
		for w, n := range tpsWindows {
			if old := b - int64(n); old >= 0 {
				m.sumTokens[w] -= m.tokens[old%tpsBuckets]
				m.sumRequests[w] -= m.requests[old%tpsBuckets]
			}
		}
		m.tokens[b%tpsBuckets], m.requests[b%tpsBuckets] = 0, 0
	}
	m.cur = idx
}

func (m *tpsMeter) add(now time.Duration, tokens int) {
	m.advance(now)
	i := m.cur % tpsBuckets
	m.tokens[i] += float64(tokens)
	m.requests[i]++
	for w := range tpsWindows {
		m.sumTokens[w] += float64(tokens)
		m.sumRequests[w]++
	}
}

// rate is the largest rate over the windows that hold enough requests, or the
// longest window's rate if none does (then counted is false). A window longer
// than the time elapsed is divided by the elapsed time (at least one bucket).
func (m *tpsMeter) rate(now time.Duration) (r float64, counted bool) {
	m.advance(now)
	best := 0.0
	for w, n := range tpsWindows {
		span := min(time.Duration(n)*tpsBucket, max(now, tpsBucket))
		r := m.sumTokens[w] / span.Seconds()
		if m.sumRequests[w] >= m.minRequests {
			best, counted = max(best, r), true
		}
	}
	if !counted {
		last := len(tpsWindows) - 1
		span := min(time.Duration(tpsWindows[last])*tpsBucket, max(now, tpsBucket))
		return m.sumTokens[last] / span.Seconds(), false
	}
	return best, true
}
