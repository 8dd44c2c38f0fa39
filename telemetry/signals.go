package telemetry

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// State is a backend's lifecycle state. A backend reports Loading, Ready or
// Draining about itself; a router adds Failed (no heartbeat within the TTL)
// and Terminated (drained and empty).
type State uint8

// Lifecycle states: Loading -> Ready -> Draining -> Terminated, any -> Failed.
const (
	Loading State = iota + 1
	Ready
	Draining
	Terminated
	Failed
)

func (s State) String() string {
	switch s {
	case Loading:
		return "loading"
	case Ready:
		return "ready"
	case Draining:
		return "draining"
	case Terminated:
		return "terminated"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("State(%d)", s)
}

// Signals is one backend's report, as its gateway sends it in a heartbeat.
// Ratios are 0..1 (not percent).
type Signals struct {
	// At is when the gateway assembled the report.
	At time.Duration `json:"at"`
	// State is the backend's own view of its lifecycle (Loading, Ready or
	// Draining); zero means Ready.
	State State `json:"state,omitempty"`

	// Application signals, from the engine's metrics and the gateway.
	QueueDepth int           `json:"queue_depth"`
	Running    int           `json:"running"`
	TTFTP95    time.Duration `json:"ttft_p95"`
	ErrorRate  float64       `json:"error_rate"`
	KVFill     float64       `json:"kv_fill"`

	// Hardware reports whether a hardware source (DCGM exporter) answered;
	// when false the hardware fields below are meaningless.
	Hardware    bool    `json:"hardware"`
	GPUUtil     float64 `json:"gpu_util"`
	MemUtil     float64 `json:"mem_util"`
	SMOccupancy float64 `json:"sm_occupancy"`
	DRAMActive  float64 `json:"dram_active"`
	// TensorActive is the mean tensor-core activity of the GPUs that
	// export it (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, 0..1); reported, not
	// scored.
	TensorActive float64 `json:"tensor_active,omitempty"`
	// PCIeBps is the mean PCIe throughput, sent plus received, of the GPUs
	// that export it (DCGM_FI_PROF_PCIE_TX_BYTES + RX_BYTES, bytes/s);
	// reported, not scored.
	PCIeBps float64 `json:"pcie_bps,omitempty"`
	// TempC is the hottest GPU's temperature; SMClockMHz the slowest GPU's
	// SM clock and MaxSMClockMHz its nominal clock (0: unknown).
	TempC         float64 `json:"temp_c"`
	SMClockMHz    float64 `json:"sm_clock_mhz"`
	MaxSMClockMHz float64 `json:"max_sm_clock_mhz"`

	// MaxModelLen is the longest prompt plus output the backend accepts
	// (from /v1/models, lowered by what its context-length errors showed);
	// zero means unknown.
	MaxModelLen int `json:"max_model_len"`
}

// Signal names one pressure.
type Signal int

// The pressures, in the order of Pressures and Weights.
const (
	SigQueue Signal = iota
	SigTTFT
	SigErrors
	SigKV
	SigGPU
	SigMem
	SigSM
	SigDRAM
	SigRTT
	SigJitter
	SigThermal
	NumSignals
)

var signalNames = [NumSignals]string{"queue", "ttft", "errors", "kv", "gpu", "mem", "sm", "dram", "rtt", "jitter", "thermal"}

func (s Signal) String() string {
	if s >= 0 && s < NumSignals {
		return signalNames[s]
	}
	return fmt.Sprintf("Signal(%d)", int(s))
}

// Hardware reports whether the signal comes from the hardware source.
func (s Signal) Hardware() bool {
	switch s {
	case SigGPU, SigMem, SigSM, SigDRAM, SigThermal:
		return true
	}
	return false
}

// Pressures are normalised signals, each in [0,1].
type Pressures [NumSignals]float64

// Norm holds the levels at which a signal counts as full pressure.
type Norm struct {
	TTFTFull      time.Duration `yaml:"ttft_full" json:"ttft_full"`
	ErrorFull     float64       `yaml:"error_full" json:"error_full"`
	RTTFull       time.Duration `yaml:"rtt_full" json:"rtt_full"`
	JitterFull    time.Duration `yaml:"jitter_full" json:"jitter_full"`
	TempOK        float64       `yaml:"temp_ok" json:"temp_ok"`
	TempMax       float64       `yaml:"temp_max" json:"temp_max"`
	ClockDropFull float64       `yaml:"clock_drop_full" json:"clock_drop_full"`
	// QueueFull is the backlog, as a fraction of the backend's capacity,
	// at which the queue pressure is full (0.5: half the engine slots).
	QueueFull float64 `yaml:"queue_full" json:"queue_full"`
	// OverloadFull is the share of a router's recent answers from the
	// backend that were overload refusals (503/429) at which the queue
	// pressure is full.
	OverloadFull float64 `yaml:"overload_full" json:"overload_full"`
	// BusyKnee is the share of a backend's slots in use (Load.Busy) above
	// which the queue pressure rises, linearly to full when every slot is
	// taken; 1 turns the busy share off (only the backlog counts).
	BusyKnee float64 `yaml:"busy_knee" json:"busy_knee"`
}

// DefaultNorm returns the levels documented in the package comment.
func DefaultNorm() Norm {
	return Norm{TTFTFull: 5 * time.Second, ErrorFull: 0.10, RTTFull: 250 * time.Millisecond,
		JitterFull: 25 * time.Millisecond, TempOK: 75, TempMax: 88, ClockDropFull: 0.3,
		QueueFull: 0.5, OverloadFull: 0.2, BusyKnee: 1}
}

// Validate reports what is wrong with the levels.
func (n Norm) Validate() error {
	var errs []error
	if n.TTFTFull <= 0 || n.RTTFull <= 0 || n.JitterFull <= 0 {
		errs = append(errs, fmt.Errorf("ttft_full, rtt_full and jitter_full must be > 0, got %v, %v and %v", n.TTFTFull, n.RTTFull, n.JitterFull))
	}
	if !(n.ErrorFull > 0 && n.ErrorFull <= 1) {
		errs = append(errs, fmt.Errorf("error_full must be in (0,1], got %v", n.ErrorFull))
	}
	if !(n.TempMax > n.TempOK) || math.IsInf(n.TempMax, 0) || math.IsInf(n.TempOK, 0) {
		errs = append(errs, fmt.Errorf("temp_max (%v) must be a finite number above temp_ok (%v)", n.TempMax, n.TempOK))
	}
	if !(n.ClockDropFull > 0 && n.ClockDropFull <= 1) {
		errs = append(errs, fmt.Errorf("clock_drop_full must be in (0,1], got %v", n.ClockDropFull))
	}
	if !(n.QueueFull > 0) || math.IsInf(n.QueueFull, 0) {
		errs = append(errs, fmt.Errorf("queue_full must be a finite number > 0 (a fraction of capacity), got %v", n.QueueFull))
	}
	if !(n.OverloadFull > 0 && n.OverloadFull <= 1) {
		errs = append(errs, fmt.Errorf("overload_full must be in (0,1], got %v", n.OverloadFull))
	}
	if !(n.BusyKnee >= 0 && n.BusyKnee <= 1) {
		errs = append(errs, fmt.Errorf("busy_knee must be in [0,1] (1: off), got %v", n.BusyKnee))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry norm: %w", err)
	}
	return nil
}

// Load is what a router counts itself about a backend at pick time.
type Load struct {
	Capacity int
	// Waiting counts requests queued at the backend and at this router for
	// it: the backlog beyond the backend's engine slots.
	Waiting int
	// Overload is the share of this router's recent answers from the
	// backend that were overload refusals (0..1).
	Overload float64
	// Busy is the share of the backend's slots this router counts in use
	// (running, sent and not yet reported, queued), 0..1 and beyond.
	Busy float64
}

// queuePressure is the queue pressure of a load with a known capacity: the
// backlog over QueueFull x capacity, the overload share over OverloadFull,
// or the busy share above BusyKnee, whichever is highest.
func queuePressure(load Load, n *Norm) float64 {
	q := max(clamp01(float64(load.Waiting)/(n.QueueFull*float64(load.Capacity))), clamp01(load.Overload/n.OverloadFull))
	if n.BusyKnee < 1 {
		q = max(q, clamp01((load.Busy-n.BusyKnee)/(1-n.BusyKnee)))
	}
	return q
}

// Normalise maps a backend's signals, the router's load counts and path to
// pressures. sig may be nil (no heartbeat with signals yet): only the queue
// and network pressures are then known. The boolean array says which
// pressures are available.
func Normalise(sig *Signals, load Load, path Path, n Norm) (p Pressures, avail [NumSignals]bool) {
	if load.Capacity > 0 {
		p[SigQueue] = queuePressure(load, &n)
		avail[SigQueue] = true
	}
	if path.Known {
		p[SigRTT] = clamp01(float64(path.RTT) / float64(n.RTTFull))
		p[SigJitter] = clamp01(float64(path.Jitter) / float64(n.JitterFull))
		avail[SigRTT], avail[SigJitter] = true, true
	}
	if sig == nil {
		return p, avail
	}
	if load.Capacity <= 0 {
		p[SigQueue] = clamp01(float64(sig.QueueDepth) / float64(max(sig.QueueDepth+sig.Running, 1)))
		avail[SigQueue] = true
	}
	p[SigTTFT] = clamp01(float64(sig.TTFTP95) / float64(n.TTFTFull))
	p[SigErrors] = clamp01(sig.ErrorRate / n.ErrorFull)
	p[SigKV] = clamp01(sig.KVFill)
	avail[SigTTFT], avail[SigErrors], avail[SigKV] = true, true, true
	if !sig.Hardware {
		return p, avail
	}
	p[SigGPU] = clamp01(sig.GPUUtil)
	p[SigMem] = clamp01(sig.MemUtil)
	p[SigSM] = clamp01(sig.SMOccupancy)
	p[SigDRAM] = clamp01(sig.DRAMActive)
	temp := clamp01((sig.TempC - n.TempOK) / (n.TempMax - n.TempOK))
	clock := 0.0
	if sig.MaxSMClockMHz > 0 && sig.SMClockMHz > 0 {
		clock = clamp01((1 - sig.SMClockMHz/sig.MaxSMClockMHz) / n.ClockDropFull)
	}
	p[SigThermal] = max(temp, clock)
	for s := range NumSignals {
		if s.Hardware() {
			avail[s] = true
		}
	}
	return p, avail
}

// clamp01 clamps v to [0,1]; NaN gives 0.
func clamp01(v float64) float64 {
	if !(v > 0) {
		return 0
	}
	return min(v, 1)
}
