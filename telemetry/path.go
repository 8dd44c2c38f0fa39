package telemetry

import "time"

// Path is a router's view of the network path to one backend.
type Path struct {
	// Known is false until a probe answered, and again once the last answer
	// is older than the estimator's Stale.
	Known bool
	// RTT is the smoothed round-trip time; Jitter the smoothed mean absolute
	// deviation of RTT samples from it.
	RTT, Jitter time.Duration
	// Samples counts the probes that answered.
	Samples int
}

// PathEstimator smooths probe round trips (see the package documentation).
// The zero value is ready to use with the default gains. Not safe for
// concurrent use.
type PathEstimator struct {
	// Stale is how long a path stays known without a new sample; zero keeps
	// it known forever.
	Stale time.Duration

	srtt, rttvar float64 // nanoseconds
	last         time.Duration
	samples      int
}

// EWMA gains: TCP's (RFC 6298) 1/8 for the RTT, 1/4 for its variation.
const (
	rttGain    = 1.0 / 8
	jitterGain = 1.0 / 4
)

// Observe adds a probe round trip measured at now. Negative samples are
// ignored.
func (e *PathEstimator) Observe(now, rtt time.Duration) {
	if rtt < 0 {
		return
	}
	x := float64(rtt)
	if e.samples == 0 {
		// RFC 6298: the first sample sets SRTT and half of it as RTTVAR; we
		// start the deviation at zero instead, as one sample shows none.
		e.srtt, e.rttvar = x, 0
	} else {
		dev := x - e.srtt
		if dev < 0 {
			dev = -dev
		}
		e.rttvar += jitterGain * (dev - e.rttvar)
		e.srtt += rttGain * (x - e.srtt)
	}
	e.samples++
	e.last = now
}

// Path reports the estimate as of now.
func (e *PathEstimator) Path(now time.Duration) Path {
	if e.samples == 0 || (e.Stale > 0 && now-e.last > e.Stale) {
		return Path{Samples: e.samples}
	}
	return Path{Known: true, RTT: time.Duration(e.srtt + 0.5), Jitter: time.Duration(e.rttvar + 0.5), Samples: e.samples}
}
