package telemetry

import (
	"math"
	"slices"
	"time"
)

// Window keeps the samples of the last Span (those taken after now - Span) (at most Max of them, newest
// kept) and reports their percentiles; a gateway keeps one for TTFT. The
// zero value keeps nothing: set Span and Max. Not safe for concurrent use.
type Window struct {
	Span time.Duration
	Max  int

	at     []time.Duration
	values []float64
	head   int
	sorted []float64 // scratch
}

// Add records a sample taken at now.
func (w *Window) Add(now time.Duration, v float64) {
	if w.Max <= 0 {
		return
	}
	w.trim(now)
	if len(w.at)-w.head >= w.Max {
		w.head++
	}
	w.at = append(w.at, now)
	w.values = append(w.values, v)
	if w.head > 64 && 2*w.head > len(w.at) {
		n := copy(w.at, w.at[w.head:])
		copy(w.values, w.values[w.head:])
		w.at, w.values, w.head = w.at[:n], w.values[:n], 0
	}
}

func (w *Window) trim(now time.Duration) {
	for w.head < len(w.at) && now-w.at[w.head] >= w.Span {
		w.head++
	}
}

// Len is the number of samples in the window at now.
func (w *Window) Len(now time.Duration) int {
	w.trim(now)
	return len(w.at) - w.head
}

// Percentile is the nearest-rank percentile (p in [0,1]) of the samples in
// the window at now; ok is false when there are none.
func (w *Window) Percentile(now time.Duration, p float64) (v float64, ok bool) {
	w.trim(now)
	n := len(w.at) - w.head
	if n == 0 {
		return 0, false
	}
	w.sorted = append(w.sorted[:0], w.values[w.head:]...)
	slices.Sort(w.sorted)
	k := int(math.Ceil(p*float64(n))) - 1
	return w.sorted[min(max(k, 0), n-1)], true
}

// ErrorRate is an error rate over recent requests with exponential decay:
// counts lose half their weight every HalfLife. The rate is
// errors / (requests + 1), so a single early failure does not read as a
// rate of 1. The zero value never decays; set HalfLife. Not safe for
// concurrent use.
type ErrorRate struct {
	HalfLife time.Duration

	errs, total float64
	last        time.Duration
}

func (e *ErrorRate) decay(now time.Duration) {
	if e.HalfLife > 0 && now > e.last {
		f := math.Exp2(-float64(now-e.last) / float64(e.HalfLife))
		e.errs *= f
		e.total *= f
	}
	if now > e.last {
		e.last = now
	}
}

// Observe records one request's outcome at now.
func (e *ErrorRate) Observe(now time.Duration, failed bool) {
	e.decay(now)
	e.total++
	if failed {
		e.errs++
	}
}

// Rate is the error rate at now.
func (e *ErrorRate) Rate(now time.Duration) float64 {
	e.decay(now)
	return e.errs / (e.total + 1)
}
