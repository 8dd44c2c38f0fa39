// Package telemetry holds what a router knows about a backend beyond its load
// counts: the signals of DESIGN's telemetry-aware placement, their
// normalisation to pressures in [0,1], the network path estimator, the mock
// DCGM exporter's model. The live gateway sends the signals in its stats
// messages, signed by package serve/auth.
//
// # Signals
//
// Signals is one backend's report, sent by its gateway in every heartbeat
// (every 500 ms by default). The ten signals of DESIGN are
//
//	application  queue depth, p95 TTFT, error rate, KV-cache fill
//	hardware     GPU utilization, memory utilization, SM occupancy, memory-bandwidth utilization
//	network      RTT and jitter from the router to the backend
//
// The application and hardware signals come from the backend (the engine's
// vLLM or SGLang metrics and a DCGM exporter, read by telemetry/scrape); the
// network signals are measured by each router with its own probes (Path,
// PathEstimator). Signals also carries the backend's max_model_len, its
// lifecycle state as the backend sees it, whether a hardware source reported
// (Hardware), and the GPU temperature and SM clock, which make the eleventh,
// thermal, pressure. The tensor-core activity and the PCIe throughput
// (TensorActive, PCIeBps) are reported, not scored.
//
// # Normalisation (Normalise)
//
// Every signal maps to a pressure in [0,1], 1 meaning most pressure. Values
// are clamped; NaN counts as 0.
//
//	queue    max(backlog / (Norm.QueueFull x capacity), overload share / Norm.OverloadFull): the backlog is
//	         what the router counts beyond the engine slots (waiting at the backend or at this router, and
//	         its own dispatches past the free slots), full at half the slots (QueueFull 0.5); the overload
//	         share is the router's recent 503/429 answers from the backend, full at 0.2; optionally
//	         (Norm.BusyKnee < 1) also the share of slots in use above the knee
//	ttft     p95 TTFT / Norm.TTFTFull (5 s, half of DESIGN's 10 s SLO)
//	errors   error rate / Norm.ErrorFull (0.10: one request in ten failing is full pressure)
//	kv       KV-cache fill as reported (0..1)
//	gpu      GPU utilization (0..1)
//	mem      framebuffer used / (used + free)
//	sm       SM occupancy, or SM activity where occupancy is not exported
//	dram     memory-bandwidth (DRAM) activity (0..1)
//	rtt      smoothed RTT / Norm.RTTFull (250 ms)
//	jitter   jitter (mean absolute deviation of RTT) / Norm.JitterFull (25 ms)
//	thermal  max((temp - Norm.TempOK) / (Norm.TempMax - Norm.TempOK), (1 - clock/max clock) / Norm.ClockDropFull)
//	         with TempOK 75 C, TempMax 88 C, ClockDropFull 0.3
//
// When Signals.Hardware is false the hardware pressures (gpu, mem, sm, dram,
// thermal) are not available; Normalise's second result reports which are.
//
// Score sums the available pressures with fixed weights (DefaultWeights) and
// Projector turns scores into integer weights with hysteresis. A router that
// scores every backend at each update uses a Scorer: the same pressures and
// scores, bit for bit, with the levels and weights prepared once.
//
// # Path estimator
//
// PathEstimator keeps a router's view of the path to one backend from probe
// round trips: RTT is an exponentially weighted moving average (alpha 1/8, as
// TCP's SRTT), jitter the EWMA (alpha 1/4, as TCP's RTTVAR) of the absolute
// deviation of each sample from the smoothed RTT. Time is passed in; a path
// with no sample for Stale is reported as unknown.
//
// Nothing here reads a clock, draws randomness or does I/O, except that
// WriteDCGM writes text to the io.Writer it is given.
package telemetry
