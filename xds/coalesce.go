package xds

import (
	"math"
	"time"
)

// Coalescer decides when a new set of endpoints is worth a push. It compares
// the latest endpoints offered with the last ones pushed:
//
//   - a change of membership, address, region or health is always
//     significant;
//   - a weight change is significant when the traffic share of some healthy
//     endpoint (its weight over the sum of healthy weights) moves by more than
//     Threshold relative to its share at the last push (0.1 = 10%). Shares,
//     not raw weights, are compared, so scaling every weight alike is no
//     change, and small drifts add up against the last push until they pass
//     the threshold. Threshold 0 makes any weight change significant.
//
// Nothing is pushed before the first endpoint is offered. The first
// significant change opens a window of Window; the push happens at
// its end with the latest endpoints offered by then, so a burst of updates
// becomes one push. If by then the endpoints came back to what was pushed,
// nothing is pushed.
//
// A Coalescer holds no clock and starts nothing: the time is an argument and
// the caller calls Flush at the time Offer returned. It is not safe for
// concurrent use. Endpoints given to it must be normalized (sorted by ID,
// weights >= 1).
type Coalescer struct {
	threshold float64
	window    time.Duration

	pushed    []Endpoint
	hasPushed bool
	latest    []Endpoint
	pending   bool
	due       time.Time
}

// NewCoalescer returns a Coalescer with the given relative share threshold
// (negative is read as 0) and coalescing window (negative is read as 0).
func NewCoalescer(threshold float64, window time.Duration) *Coalescer {
	return &Coalescer{threshold: max(threshold, 0), window: max(window, 0)}
}

// Offer records eps as the latest endpoints at now. It returns the time at
// which Flush should be called and true when a push is pending, or false when
// there is nothing to push.
func (c *Coalescer) Offer(now time.Time, eps []Endpoint) (time.Time, bool) {
	c.latest = eps
	if !c.pending && c.significant(eps) {
		c.pending = true
		c.due = now.Add(c.window)
	}
	return c.due, c.pending
}

// Flush returns the endpoints to push and true when a push is due at now. A
// push that is due but no longer significant is dropped. After a push the
// Coalescer compares later offers with what it returned.
func (c *Coalescer) Flush(now time.Time) ([]Endpoint, bool) {
	if !c.pending || now.Before(c.due) {
		return nil, false
	}
	c.pending = false
	if !c.significant(c.latest) {
		return nil, false
	}
	c.pushed, c.hasPushed = c.latest, true
	return c.latest, true
}

// Pending reports whether a push is pending, and when it is due.
func (c *Coalescer) Pending() (time.Time, bool) { return c.due, c.pending }

// significant reports whether eps differ enough from the last push. Before
// the first push only a non-empty list is: a router that has not learnt its
// gateways yet must not replace what a client holds with nothing.
func (c *Coalescer) significant(eps []Endpoint) bool {
	if !c.hasPushed {
		return len(eps) > 0
	}
	old := c.pushed
	if len(old) != len(eps) {
		return true
	}
	var oldSum, newSum float64
	for i := range eps {
		a, b := old[i], eps[i]
		if a.ID != b.ID || a.Host != b.Host || a.Port != b.Port || a.Region != b.Region || a.Health != b.Health {
			return true
		}
		if b.Health == Healthy {
			oldSum += float64(a.Weight)
			newSum += float64(b.Weight)
		}
	}
	for i := range eps {
		a, b := old[i], eps[i]
		if b.Health != Healthy || a.Weight == b.Weight {
			continue
		}
		if c.threshold == 0 {
			return true
		}
		oldShare := float64(a.Weight) / oldSum
		newShare := float64(b.Weight) / newSum
		if math.Abs(newShare-oldShare) > c.threshold*oldShare {
			return true
		}
	}
	return false
}
