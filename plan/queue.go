package plan

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// ErlangC is the probability that an arrival waits in M/M/c with c servers
// and a offered Erlangs; 1 when a >= c (the queue never drains).
func ErlangC(c int, a float64) float64 {
	if c < 1 || !(a >= 0) {
		return math.NaN()
	}
	if a >= float64(c) {
		return 1
	}
	b := 1.0
	for k := 1; k <= c; k++ {
		b = a * b / (float64(k) + a*b)
	}
	return float64(c) * b / (float64(c) - a*(1-b))
}

// Queue is an M/G/c system.
type Queue struct {
	Servers int
	// Lambda is the arrival rate per second.
	Lambda float64
	// MeanService is the mean service time of one request on one server.
	MeanService time.Duration
	// CS2 is the squared coefficient of variation of the service time.
	CS2 float64
}

// Validate reports what is wrong with a queue.
func (q Queue) Validate() error {
	var errs []error
	if q.Servers < 1 {
		errs = append(errs, fmt.Errorf("servers must be >= 1, got %d", q.Servers))
	}
	if !(q.Lambda >= 0) || math.IsInf(q.Lambda, 0) {
		errs = append(errs, fmt.Errorf("arrival rate must be a finite number >= 0, got %v", q.Lambda))
	}
	if q.MeanService <= 0 {
		errs = append(errs, fmt.Errorf("mean service time must be > 0, got %v", q.MeanService))
	}
	if !(q.CS2 >= 0) || math.IsInf(q.CS2, 0) {
		errs = append(errs, fmt.Errorf("service-time cs2 must be a finite number >= 0, got %v", q.CS2))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}

// Load is the offered load in Erlangs.
func (q Queue) Load() float64 { return q.Lambda * q.MeanService.Seconds() }

// Utilization is the offered load per server.
func (q Queue) Utilization() float64 { return q.Load() / float64(q.Servers) }

// Stable reports whether the queue drains (utilization below 1).
func (q Queue) Stable() bool { return q.Utilization() < 1 }

// decay is Kimura's theta: the exponential decay rate of the wait tail.
func (q Queue) decay() float64 {
	mu := 1 / q.MeanService.Seconds()
	return 2 * (float64(q.Servers)*mu - q.Lambda) / (1 + q.CS2)
}

// MeanWait is the approximate mean time in queue; +Inf if unstable.
func (q Queue) MeanWait() float64 {
	if !q.Stable() {
		return math.Inf(1)
	}
	return ErlangC(q.Servers, q.Load()) / q.decay()
}

// WaitQuantile is the approximate p-quantile (0 < p < 1, else NaN) of the
// time in queue, in seconds; +Inf if unstable.
func (q Queue) WaitQuantile(p float64) float64 {
	if !(p > 0 && p < 1) {
		return math.NaN()
	}
	if !q.Stable() {
		return math.Inf(1)
	}
	c := ErlangC(q.Servers, q.Load())
	if c <= 1-p {
		return 0
	}
	return math.Log(c/(1-p)) / q.decay()
}

// DefaultUtilizationCap is the highest planned utilization.
const DefaultUtilizationCap = 0.85

// Size returns the fewest servers (at most maxServers) for which the
// queue's P99 wait is within target and its utilization within cap.
func Size(q Queue, target time.Duration, utilCap float64, maxServers int) (int, error) {
	q.Servers = 1
	if err := q.Validate(); err != nil {
		return 0, err
	}
	if !(utilCap > 0 && utilCap <= 1) {
		return 0, fmt.Errorf("plan: utilization cap must be in (0, 1], got %v", utilCap)
	}
	if target < 0 {
		return 0, fmt.Errorf("plan: wait target must be >= 0, got %v", target)
	}
	// Start where the cap allows: fewer servers cannot qualify.
	q.Servers = max(1, int(math.Ceil(q.Load()/utilCap-1e-9)))
	for ; q.Servers <= maxServers; q.Servers++ {
		if q.Utilization() <= utilCap && q.WaitQuantile(0.99) <= target.Seconds() {
			return q.Servers, nil
		}
	}
	return 0, fmt.Errorf("plan: no size up to %d servers meets a P99 wait of %v at utilization <= %v (load %.1f Erlangs)",
		maxServers, target, utilCap, q.Load())
}
