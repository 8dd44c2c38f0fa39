package policy

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// BurstParams configure the pressure policy's burst detector: a test, on
// the requests arriving at this router (each counted once, at the pick the
// router marks as its arrival: Request.Arrival), of whether more arrived
// within the last Window than Poisson arrivals at the router's recent rate
// would bring more often than FalseAlarms times an hour. While it is on, a
// backend's level moves to more pressure by Hysteresis levels or more at
// once, instead of waiting for the projector's hysteresis: the busy share
// the router counts itself (its own dispatches since the backend's last
// report, its own queue) moves the weights at the burst's first picks, not
// after the next reports. Moves to less pressure keep the projector's
// hysteresis, so a burst cannot make the weights swing back and forth.
//
// The rate is the arrivals of the last Baseline, counted in 30 buckets of
// Baseline/30 (the current bucket left out, so a burst does not raise its
// own threshold); the detector is armed once it has counted a whole
// Baseline. At an arrival, with rate λ and n arrivals in the Window before
// it, it fires if n >= m, m the least count with λ·P(Poisson(λ·Window) >= m)
// <= FalseAlarms/3600: for Poisson arrivals at the baseline rate, it fires
// falsely at most FalseAlarms times an hour. A firing keeps it on for Hold.
type BurstParams struct {
	// Window is the span the detector counts arrivals in; 0 turns it off.
	Window time.Duration `yaml:"window" json:"window"`
	// Baseline is the span of the recent arrival rate the count is tested
	// against.
	Baseline time.Duration `yaml:"baseline" json:"baseline"`
	// FalseAlarms is the chosen false-alarm rate, in firings an hour per
	// router, for Poisson arrivals at the baseline rate.
	FalseAlarms float64 `yaml:"false_alarms" json:"false_alarms"`
	// Hold is how long a firing keeps the detector on.
	Hold time.Duration `yaml:"hold" json:"hold"`
	// Hysteresis is the least move of a level to more pressure that applies
	// while the detector is on (the projector's hysteresis otherwise).
	Hysteresis int `yaml:"hysteresis" json:"hysteresis"`
}

// DefaultBurstParams are the detector's defaults (docs/pressure.md, "Burst
// reaction"): a 100 ms window against the last 30 s, at most 1 false
// firing an hour per router, on for 1 s after a firing (two gateway report
// intervals, so the reports that carry the other routers' share of the
// burst move the levels too), moves of 1 level or more.
func DefaultBurstParams() BurstParams {
	return BurstParams{Window: 100 * time.Millisecond, Baseline: 30 * time.Second, FalseAlarms: 1, Hold: time.Second, Hysteresis: 1}
}

// Bounds of BurstParams.
const (
	// burstBuckets is how many buckets the baseline is counted in.
	burstBuckets = 30
	// maxBurstCount bounds the count the detector compares against (and so
	// the arrival times it keeps): at rates where the threshold would be
	// higher (about 40,000 arrivals a second per router at a 100 ms window)
	// it fires more often than FalseAlarms says. The ring of times holds
	// twice the threshold (64 KiB at most).
	maxBurstCount = 4096
	maxBurstSpan  = time.Hour
)

// Validate reports what is wrong with the parameters.
func (bp BurstParams) Validate() error {
	if bp.Window == 0 {
		return nil
	}
	var errs []error
	if bp.Window < time.Millisecond || bp.Window > 10*time.Second {
		errs = append(errs, fmt.Errorf("window must be 0 (off) or between 1ms and 10s, got %v", bp.Window))
	}
	if bp.Baseline < 10*bp.Window || bp.Baseline > maxBurstSpan {
		errs = append(errs, fmt.Errorf("baseline must be at least 10 windows (%v) and at most %v, got %v", 10*bp.Window, maxBurstSpan, bp.Baseline))
	}
	if !(bp.FalseAlarms >= 0.01 && bp.FalseAlarms <= 3600) {
		errs = append(errs, fmt.Errorf("false_alarms must be between 0.01 and 3600 firings an hour, got %v", bp.FalseAlarms))
	}
	if bp.Hold < 0 || bp.Hold > time.Minute {
		errs = append(errs, fmt.Errorf("hold must be between 0 and 1m, got %v", bp.Hold))
	}
	if bp.Hysteresis < 1 {
		errs = append(errs, fmt.Errorf("hysteresis must be at least 1 level, got %d", bp.Hysteresis))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("burst (window 0 turns the detector off): %w", err)
	}
	return nil
}

// burstDetector is BurstParams' test, a deterministic state machine: time
// comes in with each arrival.
type burstDetector struct {
	p BurstParams
	// The baseline: counts per bucket, the bucket now filling and when it
	// started, how many buckets have closed (up to burstBuckets).
	buckets [burstBuckets]int
	cur     int
	start   time.Duration
	closed  int
	started bool
	// need is the count of arrivals within Window before an arrival that
	// fires (0: not armed), computed when a bucket closes.
	need int
	// times are the latest arrivals, a ring of which filled are set; next
	// is where the next one goes.
	times  []time.Duration
	next   int
	filled int
	until  time.Duration // on while now <= until
	fired  bool
}

func newBurstDetector(bp BurstParams) *burstDetector {
	if bp.Window <= 0 {
		return nil
	}
	return &burstDetector{p: bp}
}

// width is one bucket's span.
func (d *burstDetector) width() time.Duration { return d.p.Baseline / burstBuckets }

// arrive counts an arrival at now and reports whether the detector fired.
func (d *burstDetector) arrive(now time.Duration) bool {
	d.advance(now)
	d.buckets[d.cur]++
	if d.need == 0 {
		return false
	}
	n := len(d.times)
	// The need-th latest arrival before this one is within Window.
	fire := d.filled >= d.need && now-d.times[(d.next-d.need+n)%n] <= d.p.Window
	d.times[d.next] = now
	d.next = (d.next + 1) % n
	d.filled = min(d.filled+1, n)
	if fire {
		d.until, d.fired = now+d.p.Hold, true
	}
	return fire
}

// on reports whether the detector is on at now.
func (d *burstDetector) on(now time.Duration) bool {
	return d != nil && d.fired && now <= d.until
}

// advance closes the buckets that ended by now and, if any did, sets the
// threshold from the new baseline.
func (d *burstDetector) advance(now time.Duration) {
	if !d.started {
		d.start, d.started = now, true
		return
	}
	w := d.width()
	if now < d.start+w {
		return
	}
	for n := 0; now >= d.start+w && n < burstBuckets; n++ {
		d.cur = (d.cur + 1) % burstBuckets
		d.buckets[d.cur] = 0
		d.start += w
		d.closed = min(d.closed+1, burstBuckets)
	}
	if now >= d.start+w { // a gap of a whole baseline: every bucket is empty
		d.start += (now - d.start) / w * w
	}
	if d.closed < burstBuckets {
		return
	}
	total := 0
	for i, c := range d.buckets {
		if i != d.cur {
			total += c
		}
	}
	rate := float64(total) / (float64(burstBuckets-1) * w.Seconds())
	d.setNeed(burstThreshold(rate, d.p.Window.Seconds(), d.p.FalseAlarms/3600))
}

// setNeed sets the threshold. The ring of arrival times holds at least 64
// and twice the largest threshold yet, so a threshold that rises finds the
// arrivals it needs already there (unless it rises past the ring, at rates
// of thousands a second that climb within a bucket; the detector then
// waits until the ring holds the threshold).
func (d *burstDetector) setNeed(need int) {
	d.need = need
	n := len(d.times)
	if need <= n {
		return
	}
	size := max(2*need, 64)
	k := min(d.filled, size)
	times := make([]time.Duration, size)
	for i := range k { // the latest k, oldest first
		times[i] = d.times[(d.next-k+i+2*n)%n]
	}
	d.times, d.filled, d.next = times, k, k%len(times)
}

// burstThreshold is the least m >= 1 with rate·P(N >= m) <= alarms, N
// Poisson with mean rate·window: the count of arrivals within window
// before an arrival at which the detector fires at most alarms times a
// second (at most maxBurstCount).
func burstThreshold(rate, window, alarms float64) int {
	mu := rate * window
	if rate <= alarms {
		return 1 // fewer arrivals than allowed alarms: any company is news
	}
	pmf := math.Exp(-mu)
	tail := 1.0 // P(N >= m), starting at m = 0
	for m := 1; m <= maxBurstCount; m++ {
		tail -= pmf // P(N >= m) = P(N >= m-1) - P(N = m-1)
		if rate*tail <= alarms {
			return m
		}
		pmf *= mu / float64(m)
		if pmf == 0 && mu > float64(m) { // beyond float range of e^-mu: use the normal bound
			return min(maxBurstCount, int(math.Ceil(mu+6*math.Sqrt(mu))))
		}
	}
	return maxBurstCount
}
