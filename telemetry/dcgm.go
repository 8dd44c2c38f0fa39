package telemetry

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// GPUState is what the mock DCGM exporter knows of one engine worker (one
// GPU) over the last sampling interval.
type GPUState struct {
	// Busy is the share of the interval the worker spent in engine steps.
	Busy float64
	// Batch is the number of running sequences; MaxSeqs the worker's limit.
	Batch, MaxSeqs int
	// KVUsed is the KV tokens held (running sequences and prefix cache) of
	// a budget of KVTokens.
	KVUsed, KVTokens int
	// ThermalC is the heat a thermal fault adds, in degrees Celsius.
	ThermalC float64
	// ClockFactor is the SM clock as a share of nominal; 0 means 1.
	ClockFactor float64
	// PCIeStress is the share of the GPU's PCIe link (MockPCIeLinkBps each
	// way) that a stressor's traffic takes (a PCIe-stress fault), 0..1.
	PCIeStress float64
}

// GPUValues are one GPU's DCGM fields. Utilization is in percent, as DCGM
// exports DCGM_FI_DEV_GPU_UTIL; the profiling fields are ratios 0..1.
type GPUValues struct {
	GPU         int
	UtilPct     float64 // DCGM_FI_DEV_GPU_UTIL
	FBUsedMiB   float64 // DCGM_FI_DEV_FB_USED
	FBFreeMiB   float64 // DCGM_FI_DEV_FB_FREE
	SMOccupancy float64 // DCGM_FI_PROF_SM_OCCUPANCY
	SMActive    float64 // DCGM_FI_PROF_SM_ACTIVE
	DRAMActive  float64 // DCGM_FI_PROF_DRAM_ACTIVE
	// TensorActive is DCGM_FI_PROF_PIPE_TENSOR_ACTIVE: the ratio of cycles
	// the tensor-core pipes are active.
	TensorActive float64
	TempC        float64 // DCGM_FI_DEV_GPU_TEMP
	SMClockMHz   float64 // DCGM_FI_DEV_SM_CLOCK
	MaxClockMHz  float64 // DCGM_FI_DEV_MAX_SM_CLOCK
	// PCIeTxBps and PCIeRxBps are DCGM_FI_PROF_PCIE_TX_BYTES and
	// DCGM_FI_PROF_PCIE_RX_BYTES: the bytes per second the GPU sends and
	// receives over PCIe.
	PCIeTxBps, PCIeRxBps float64
	// Has records which fields the source exported (a parsed exposition
	// may lack some); MockDCGM sets them all.
	Has GPUFields
}

// GPUFields flags the fields present in a GPUValues.
type GPUFields struct {
	Util, FB, SMOccupancy, SMActive, DRAMActive, Temp, Clock, MaxClock bool
	Tensor, PCIe                                                       bool
}

// The mock GPU: an 80 GB card whose framebuffer holds the model and runtime
// (MockBaseMiB) and a KV pool (MockKVMiB) that fills with the worker's KV
// tokens, as if it grew on demand (vLLM preallocates it, so a real exporter
// shows it full; the mock shows use, which says more). It idles at
// MockIdleC and warms by MockBusyC when busy all the time.
const (
	MockFBTotalMiB  = 81559
	MockBaseMiB     = 40000
	MockKVMiB       = 36000
	MockIdleC       = 32.0
	MockBusyC       = 38.0
	MockMaxClockMHz = 1980.0
	// MockPCIeLinkBps is a PCIe Gen5 x16 link's bandwidth each way;
	// MockPCIeServeBps the traffic of serving alone when busy all the time
	// (prompts in, tokens out, KV swaps: little next to the link).
	MockPCIeLinkBps  = 63e9
	MockPCIeServeBps = 1.5e9
)

// MockDCGM maps a worker's state to the fields a DCGM exporter would show:
//
//	GPU_UTIL       100 x busy
//	FB_USED        MockBaseMiB + MockKVMiB x KVUsed/KVTokens; FB_FREE the rest of MockFBTotalMiB
//	SM_ACTIVE      busy x (0.35 + 0.60 x batch/max_seqs)
//	SM_OCCUPANCY   busy x (0.20 + 0.60 x batch/max_seqs)
//	DRAM_ACTIVE    busy x (0.30 + 0.60 x batch/max_seqs)   (decode reads the KV of every sequence)
//	PIPE_TENSOR_ACTIVE  busy x (0.25 + 0.50 x batch/max_seqs)   (the matrix products grow with the batch)
//	GPU_TEMP       MockIdleC + MockBusyC x busy + ThermalC
//	SM_CLOCK       MockMaxClockMHz x ClockFactor
//	PCIE_TX_BYTES, PCIE_RX_BYTES   MockPCIeServeBps x busy + MockPCIeLinkBps x PCIeStress (bytes/s)
func MockDCGM(gpu int, s GPUState) GPUValues {
	busy := clamp01(s.Busy)
	fill := 0.0
	if s.KVTokens > 0 {
		fill = clamp01(float64(s.KVUsed) / float64(s.KVTokens))
	}
	batch := 0.0
	if s.MaxSeqs > 0 {
		batch = clamp01(float64(s.Batch) / float64(s.MaxSeqs))
	}
	clock := s.ClockFactor
	if !(clock > 0) {
		clock = 1
	}
	used := MockBaseMiB + MockKVMiB*fill
	pcie := math.Round(MockPCIeServeBps*busy + MockPCIeLinkBps*clamp01(s.PCIeStress))
	return GPUValues{GPU: gpu, UtilPct: math.Round(100 * busy), FBUsedMiB: math.Round(used), FBFreeMiB: math.Round(MockFBTotalMiB - used),
		SMActive: busy * (0.35 + 0.60*batch), SMOccupancy: busy * (0.20 + 0.60*batch), DRAMActive: busy * (0.30 + 0.60*batch),
		TensorActive: busy * (0.25 + 0.50*batch),
		TempC:        math.Round(MockIdleC + MockBusyC*busy + s.ThermalC), SMClockMHz: math.Round(MockMaxClockMHz * min(clock, 1)),
		MaxClockMHz: MockMaxClockMHz, PCIeTxBps: pcie, PCIeRxBps: pcie,
		Has: GPUFields{Util: true, FB: true, SMOccupancy: true, SMActive: true, DRAMActive: true, Temp: true, Clock: true, MaxClock: true,
			Tensor: true, PCIe: true}}
}

// Hardware folds GPUs' fields into the hardware part of sig: means of
// utilization, memory, occupancy, bandwidth, tensor-core activity and PCIe
// throughput (the last two over the GPUs that export them); the hottest
// temperature and
// the slowest clock. SM occupancy falls back to SM activity where a GPU does
// not export occupancy. With no GPU it sets sig.Hardware to false.
func Hardware(sig *Signals, gpus []GPUValues) {
	sig.Hardware = len(gpus) > 0
	sig.GPUUtil, sig.MemUtil, sig.SMOccupancy, sig.DRAMActive, sig.TensorActive = 0, 0, 0, 0, 0
	sig.TempC, sig.SMClockMHz, sig.MaxSMClockMHz, sig.PCIeBps = 0, 0, 0, 0
	if len(gpus) == 0 {
		return
	}
	n := float64(len(gpus))
	slowest := -1.0
	tensors, links := 0, 0
	for _, g := range gpus {
		if g.Has.PCIe {
			sig.PCIeBps += max(g.PCIeTxBps, 0) + max(g.PCIeRxBps, 0)
			links++
		}
		if g.Has.Tensor {
			sig.TensorActive += clamp01(g.TensorActive)
			tensors++
		}
		sig.GPUUtil += clamp01(g.UtilPct/100) / n
		if total := g.FBUsedMiB + g.FBFreeMiB; total > 0 {
			sig.MemUtil += clamp01(g.FBUsedMiB/total) / n
		}
		occ := g.SMOccupancy
		if !g.Has.SMOccupancy {
			occ = g.SMActive
		}
		sig.SMOccupancy += clamp01(occ) / n
		sig.DRAMActive += clamp01(g.DRAMActive) / n
		if g.Has.Temp && g.TempC > sig.TempC {
			sig.TempC = g.TempC
		}
		if g.Has.Clock && g.Has.MaxClock && g.MaxClockMHz > 0 {
			if f := g.SMClockMHz / g.MaxClockMHz; slowest < 0 || f < slowest {
				slowest = f
				sig.SMClockMHz, sig.MaxSMClockMHz = g.SMClockMHz, g.MaxClockMHz
			}
		}
	}
	if tensors > 0 {
		sig.TensorActive /= float64(tensors)
	}
	if links > 0 {
		sig.PCIeBps /= float64(links)
	}
}

// dcgmFields are the exported fields, in exposition order.
var dcgmFields = []struct {
	name, help string
	value      func(*GPUValues) float64
	has        func(*GPUFields) bool
}{
	{"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", func(g *GPUValues) float64 { return g.UtilPct }, func(h *GPUFields) bool { return h.Util }},
	{"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", func(g *GPUValues) float64 { return g.FBUsedMiB }, func(h *GPUFields) bool { return h.FB }},
	{"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", func(g *GPUValues) float64 { return g.FBFreeMiB }, func(h *GPUFields) bool { return h.FB }},
	{"DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.", func(g *GPUValues) float64 { return g.SMActive }, func(h *GPUFields) bool { return h.SMActive }},
	{"DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM.", func(g *GPUValues) float64 { return g.SMOccupancy }, func(h *GPUFields) bool { return h.SMOccupancy }},
	{"DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending or receiving data.", func(g *GPUValues) float64 { return g.DRAMActive }, func(h *GPUFields) bool { return h.DRAMActive }},
	{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.", func(g *GPUValues) float64 { return g.TensorActive }, func(h *GPUFields) bool { return h.Tensor }},
	{"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", func(g *GPUValues) float64 { return g.TempC }, func(h *GPUFields) bool { return h.Temp }},
	{"DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", func(g *GPUValues) float64 { return g.SMClockMHz }, func(h *GPUFields) bool { return h.Clock }},
	{"DCGM_FI_DEV_MAX_SM_CLOCK", "Maximum SM clock frequency (in MHz).", func(g *GPUValues) float64 { return g.MaxClockMHz }, func(h *GPUFields) bool { return h.MaxClock }},
	{"DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", func(g *GPUValues) float64 { return g.PCIeTxBps }, func(h *GPUFields) bool { return h.PCIe }},
	{"DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes per second.", func(g *GPUValues) float64 { return g.PCIeRxBps }, func(h *GPUFields) bool { return h.PCIe }},
}

// WriteDCGM writes gpus in the Prometheus text format of NVIDIA's DCGM
// exporter (gauges labelled gpu, UUID, device, modelName and Hostname), so a
// live shell can serve it at /metrics. Only the fields each GPU has are
// written.
func WriteDCGM(w io.Writer, hostname string, gpus []GPUValues) error {
	bw := bufio.NewWriter(w)
	host := escapeLabel(hostname)
	for _, f := range dcgmFields {
		fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s gauge\n", f.name, f.help, f.name)
		for i := range gpus {
			g := &gpus[i]
			if !f.has(&g.Has) {
				continue
			}
			fmt.Fprintf(bw, "%s{gpu=\"%d\",UUID=\"GPU-stargate-mock-%d\",device=\"nvidia%d\",modelName=\"Stargate mock GPU\",Hostname=\"%s\"} %s\n",
				f.name, g.GPU, g.GPU, g.GPU, host, strconv.FormatFloat(f.value(g), 'g', -1, 64))
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("telemetry: writing DCGM metrics: %w", err)
	}
	return nil
}

// escapeLabel escapes a label value for the Prometheus text format.
func escapeLabel(s string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}
