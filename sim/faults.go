package sim

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stargate-llm/stargate/gateway"
)

// FaultKind names a fault the simulator can inject.
type FaultKind string

// The faults. Each applies to the backends a Fault lists, from At until Until
// (zero: to the end of the run), except burst, which adds sessions.
const (
	// FaultKill: the backend's processes die. Requests it holds fail at
	// once (connection reset); requests that reach it later are refused
	// (connection refused); it sends no more stats or heartbeats.
	FaultKill FaultKind = "kill"
	// FaultHang: the backend stops answering. Requests it holds and those
	// that reach it get no answer (the client's timeout ends them); it
	// sends no more stats or heartbeats.
	FaultHang FaultKind = "hang"
	// FaultErrors: a share Rate of the requests that reach the backend fail
	// at once with a server error.
	FaultErrors FaultKind = "errors"
	// FaultLimit: the backend refuses requests whose prompt plus output
	// exceeds Limit tokens with a context-length error (HTTP 400, not
	// retried), while its /v1/models still reports its old limit.
	FaultLimit FaultKind = "limit"
	// FaultPath: every message between a router and the backend, both
	// ways, is delayed by RTT/2 plus an exponential delay of mean Jitter.
	FaultPath FaultKind = "path"
	// FaultThermal: the backend's GPUs heat up by PeakC degrees, linearly
	// over Ramp; from half way through the ramp their clock throttles,
	// linearly down to MinClock of nominal at its end, and every engine
	// step costs 1/clock as much. Temperature moves first, then the clock
	// and the step cost together, then queues and TTFT.
	FaultThermal FaultKind = "thermal"
	// FaultPCIe: PCIe contention on the backend's host (the Solyx AI Grid
	// paper's stress-ng PCIe stress): a stressor's traffic takes a share of
	// every GPU's PCIe link that grows linearly over Ramp to Share, and
	// every engine step costs 1 + (Slowdown - 1) x the same ramp (the
	// host-device copies of each step wait for the link). The PCIe
	// throughput fields of the mock DCGM exporter rise with the stressor's
	// traffic at once; the step cost, then queues and TTFT, follow. Neither
	// temperature nor clock moves.
	FaultPCIe FaultKind = "pcie"
	// FaultExporter: the backend's DCGM exporter dies; its reports carry no
	// hardware signals.
	FaultExporter FaultKind = "exporter"
	// FaultRestart: the backend's engine dies at At and is serving again
	// at Until, while its gateway lives on. What the engine holds fails at
	// once (as for kill); its gateway reports Loading, and refuses requests
	// as overloaded, until Until plus the gateway's warm-up
	// (gateway.Config.WarmUp). The engine's prefix cache survives.
	FaultRestart FaultKind = "restart"
	// FaultBurst: Count new sessions arrive at once at At and every Every
	// after it (until Until).
	FaultBurst FaultKind = "burst"
)

// Fault is one injected fault.
type Fault struct {
	Kind     FaultKind
	Backends []int
	At       time.Duration
	Until    time.Duration

	Rate        float64       // errors
	Limit       int           // limit
	RTT, Jitter time.Duration // path
	PeakC       float64       // thermal
	Ramp        time.Duration // thermal, pcie
	MinClock    float64       // thermal
	Share       float64       // pcie
	Slowdown    float64       // pcie
	Every       time.Duration // burst
	Count       int           // burst
}

func (f *Fault) validate(backends int) error {
	var errs []error
	if f.At < 0 || (f.Until != 0 && f.Until <= f.At) {
		errs = append(errs, fmt.Errorf("want 0 <= at < until (until 0: to the end), got %v and %v", f.At, f.Until))
	}
	if f.Kind != FaultBurst && len(f.Backends) == 0 {
		errs = append(errs, errors.New("names no backend"))
	}
	for _, b := range f.Backends {
		if b < 0 || b >= backends {
			errs = append(errs, fmt.Errorf("backend index %d out of range", b))
		}
	}
	switch f.Kind {
	case FaultKill, FaultHang:
		if f.Until != 0 {
			errs = append(errs, errors.New("a killed or hung backend does not come back: until must be 0"))
		}
	case FaultExporter:
	case FaultRestart:
		if f.Until == 0 {
			errs = append(errs, errors.New("a restarted engine serves again at until: until must be set"))
		}
	case FaultErrors:
		if !(f.Rate > 0 && f.Rate <= 1) {
			errs = append(errs, fmt.Errorf("rate must be in (0,1], got %v", f.Rate))
		}
	case FaultLimit:
		if f.Limit < 1 {
			errs = append(errs, fmt.Errorf("limit must be >= 1, got %d", f.Limit))
		}
	case FaultPath:
		if f.RTT < 0 || f.Jitter < 0 || f.RTT+f.Jitter == 0 {
			errs = append(errs, fmt.Errorf("rtt and jitter must be >= 0 and not both 0, got %v and %v", f.RTT, f.Jitter))
		}
	case FaultThermal:
		if !(f.PeakC > 0) || f.Ramp <= 0 || !(f.MinClock > 0 && f.MinClock <= 1) || math.IsInf(f.PeakC, 0) {
			errs = append(errs, fmt.Errorf("want peak_c > 0, ramp > 0 and min_clock in (0,1], got %v, %v and %v", f.PeakC, f.Ramp, f.MinClock))
		}
	case FaultPCIe:
		if f.Ramp <= 0 || !(f.Share > 0 && f.Share <= 1) || !(f.Slowdown >= 1) || math.IsInf(f.Slowdown, 0) {
			errs = append(errs, fmt.Errorf("want ramp > 0, share in (0,1] and a finite slowdown >= 1, got %v, %v and %v", f.Ramp, f.Share, f.Slowdown))
		}
	case FaultBurst:
		if f.Count < 1 || f.Count > 100_000 || f.Every < 0 {
			errs = append(errs, fmt.Errorf("want 1 <= count <= 100000 and every >= 0, got %d and %v", f.Count, f.Every))
		}
	default:
		errs = append(errs, fmt.Errorf("unknown fault kind %q (kill, hang, errors, limit, path, thermal, pcie, exporter, restart, burst)", f.Kind))
	}
	return errors.Join(errs...)
}

// active reports whether the fault is in force at now.
func (f *Fault) active(now time.Duration) bool {
	return now >= f.At && (f.Until == 0 || now < f.Until)
}

// faultState is what the faults in force do to one backend.
type faultState struct {
	dead, hung   bool
	errRate      float64
	limit        int
	pathRTT      time.Duration
	pathJitter   time.Duration
	thermal      *Fault
	pcie         *Fault
	exporterDead bool
}

// thermalAt is the thermal fault's added heat and clock factor at now.
func thermalAt(f *Fault, now time.Duration) (heatC, clock float64) {
	if f == nil || !f.active(now) {
		return 0, 1
	}
	x := min(float64(now-f.At)/float64(f.Ramp), 1)
	heatC = f.PeakC * x
	clock = 1
	if x > 0.5 {
		clock = 1 - (1-f.MinClock)*(x-0.5)/0.5
	}
	return heatC, clock
}

// pcieAt is the PCIe fault's link share taken by the stressor and step
// cost factor at now.
func pcieAt(f *Fault, now time.Duration) (share, slowdown float64) {
	if f == nil || !f.active(now) {
		return 0, 1
	}
	x := min(float64(now-f.At)/float64(f.Ramp), 1)
	return f.Share * x, 1 + (f.Slowdown-1)*x
}

// restart applies restart fault i at its start (the engine dies: what it
// holds fails, its gateway hears the engine is not serving) or its end (the
// engine serves again: the gateway warms up, then admits).
func (s *simulation) restart(i int, ending bool) {
	f := &s.cfg.Faults[i]
	what := "fault:"
	if ending {
		what = "end:"
	}
	for _, b := range f.Backends {
		bs := s.backends[b]
		s.marks = append(s.marks, Mark{At: s.now, Backend: b, What: what + string(f.Kind)})
		if ending {
			s.admitted = bs.gw.ObserveEngine(s.now, gateway.EngineProbe{Reachable: true, Healthy: true, ModelsListed: true}, s.admitted[:0])
			s.submitAll(b)
			s.markStats(b)
			continue
		}
		bs.gw.ObserveEngine(s.now, gateway.EngineProbe{}, nil)
		// What the engine held is gone from the gateway and the engine;
		// kill then fails each attempt as a crash does. The gateway lives
		// on: its stats (Loading) and the workers' timers start again.
		for _, a := range s.attempts.items {
			if a == nil || a.done || a.backend != b || a.place != atGateway {
				continue
			}
			if wasActive, _ := bs.gw.Cancel(s.now, a.id, nil); wasActive {
				for w := range bs.cl.Len() {
					if bs.cl.Worker(w).Cancel(s.now, a.id) {
						break
					}
				}
			}
		}
		s.kill(b)
		for w := range bs.cl.Len() {
			s.scheduleWorker(b, w)
		}
		s.markStats(b)
	}
}
