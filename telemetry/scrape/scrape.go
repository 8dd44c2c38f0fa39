package scrape

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stargate-llm/stargate/telemetry"
)

// MaxBytes bounds one exposition.
const MaxBytes = 8 << 20

// ErrTooLarge is returned for an exposition over MaxBytes.
var ErrTooLarge = errors.New("scrape: exposition larger than the limit")

// parse reads an exposition into metric families, refusing oversized input.
func parse(r io.Reader) (map[string]*dto.MetricFamily, error) {
	lr := &io.LimitedReader{R: r, N: MaxBytes + 1}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(lr)
	if lr.N <= 0 {
		return nil, fmt.Errorf("%w (%d bytes)", ErrTooLarge, MaxBytes)
	}
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	return fams, nil
}

// value reads a gauge, counter or untyped sample; ok is false for other
// types and for NaN.
func value(m *dto.Metric) (float64, bool) {
	var v float64
	switch {
	case m.Gauge != nil:
		v = m.Gauge.GetValue()
	case m.Counter != nil:
		v = m.Counter.GetValue()
	case m.Untyped != nil:
		v = m.Untyped.GetValue()
	default:
		return 0, false
	}
	return v, !math.IsNaN(v)
}

// sum adds a family's samples; ok is false if it has none.
func sum(fams map[string]*dto.MetricFamily, name string) (total float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.Metric {
		if v, good := value(m); good {
			total += v
			ok = true
		}
	}
	return total, ok
}

// Histogram is a cumulative histogram: Counts[i] observations were <=
// Upper[i]. Upper is increasing and ends with +Inf when the source had it.
type Histogram struct {
	Upper  []float64
	Counts []float64
	Count  float64
	Sum    float64
}

// histogram sums a histogram family's series that share bucket bounds with
// the first series.
func histogram(fams map[string]*dto.MetricFamily, name string) (Histogram, bool) {
	f := fams[name]
	if f == nil {
		return Histogram{}, false
	}
	var h Histogram
	found := false
	for _, m := range f.Metric {
		mh := m.Histogram
		if mh == nil {
			continue
		}
		var upper, counts []float64
		for _, b := range mh.Bucket {
			upper = append(upper, b.GetUpperBound())
			counts = append(counts, float64(b.GetCumulativeCount()))
		}
		if !found {
			h = Histogram{Upper: upper, Counts: counts}
			found = true
		} else if slices.Equal(upper, h.Upper) {
			for i := range counts {
				h.Counts[i] += counts[i]
			}
		} else {
			continue
		}
		h.Count += float64(mh.GetSampleCount())
		h.Sum += mh.GetSampleSum()
	}
	return h, found
}

// Sub is the histogram of the observations since prev (an earlier scrape of
// the same series). If the bounds differ or a count went down (the engine
// restarted), it returns h itself.
func (h Histogram) Sub(prev Histogram) Histogram {
	if !slices.Equal(h.Upper, prev.Upper) || h.Count < prev.Count {
		return h
	}
	d := Histogram{Upper: h.Upper, Counts: make([]float64, len(h.Counts)), Count: h.Count - prev.Count, Sum: h.Sum - prev.Sum}
	for i := range h.Counts {
		if h.Counts[i] < prev.Counts[i] {
			return h
		}
		d.Counts[i] = h.Counts[i] - prev.Counts[i]
	}
	return d
}

// Quantile estimates the q-quantile (0..1) as Prometheus's
// histogram_quantile does: linear within the bucket that holds it, the
// lower bound of the first bucket taken as 0, and the highest finite bound
// when it falls in the +Inf bucket. ok is false with no observations.
func (h Histogram) Quantile(q float64) (float64, bool) {
	n := len(h.Counts)
	if n == 0 || !(q >= 0 && q <= 1) {
		return 0, false
	}
	total := h.Counts[n-1]
	if !(total > 0) {
		return 0, false
	}
	rank := q * total
	for i := range n {
		if h.Counts[i] < rank {
			continue
		}
		hi := h.Upper[i]
		if math.IsInf(hi, 1) {
			if i == 0 {
				return 0, false
			}
			return h.Upper[i-1], true
		}
		lo, below := 0.0, 0.0
		if i > 0 {
			lo, below = h.Upper[i-1], h.Counts[i-1]
		}
		in := h.Counts[i] - below
		if in <= 0 {
			return hi, true
		}
		return lo + (hi-lo)*(rank-below)/in, true
	}
	return h.Upper[n-1], true
}

// Engine is what a gateway reads from an inference engine's metrics.
type Engine struct {
	// Kind is "vllm" or "sglang", by the names found.
	Kind string
	// Running and Waiting are requests in the batch and in the queue,
	// summed over the engine's series (e.g. one per model).
	Running, Waiting float64
	// KVFill is the KV-cache usage, 0..1; HasKV says it was exported.
	KVFill float64
	HasKV  bool
	// TTFT is the cumulative time-to-first-token histogram, in seconds;
	// HasTTFT says it was exported.
	TTFT    Histogram
	HasTTFT bool
	// StartTime is process_start_time_seconds (unix seconds), which a
	// restart changes; zero when not exported (vLLM in multiprocess mode).
	StartTime float64
	// MaxSeqs is the engine's sequence limit where its metrics say it: the
	// max_num_seqs label of vllm:cache_config_info (the stargate engine
	// sets it; vLLM itself does not); zero when unknown.
	MaxSeqs int
	// CacheTokens is how many prompt tokens the engine's KV cache holds,
	// GPU and host tier together: (num_gpu_blocks + num_cpu_blocks) x
	// block_size from the labels of vllm:cache_config_info, summed over its
	// series (one per engine core of a data-parallel vLLM) and capped at
	// telemetry.MaxCacheTokens; zero when the labels are missing or malformed.
	CacheTokens int
}

// engineNames are the metric names of one engine kind.
type engineNames struct {
	kind, running, waiting, ttft string
	kv                           []string // first present wins
}

var engines = []engineNames{
	{kind: "vllm", running: "vllm:num_requests_running", waiting: "vllm:num_requests_waiting",
		ttft: "vllm:time_to_first_token_seconds", kv: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}},
	{kind: "sglang", running: "sglang:num_running_reqs", waiting: "sglang:num_queue_reqs",
		ttft: "sglang:time_to_first_token_seconds", kv: []string{"sglang:token_usage"}},
}

// ErrNoEngineMetrics is returned when an exposition has neither vLLM's nor
// SGLang's request gauges.
var ErrNoEngineMetrics = errors.New("scrape: no vLLM or SGLang request gauges in the exposition")

// ParseEngine reads an engine's /metrics text. KV usage and the TTFT
// histogram are optional; running and waiting requests are not.
func ParseEngine(r io.Reader) (Engine, error) {
	fams, err := parse(r)
	if err != nil {
		return Engine{}, err
	}
	for _, n := range engines {
		running, okR := sum(fams, n.running)
		waiting, okW := sum(fams, n.waiting)
		if !okR && !okW {
			continue
		}
		e := Engine{Kind: n.kind, Running: max(running, 0), Waiting: max(waiting, 0)}
		for _, kv := range n.kv {
			if f, ok := mean(fams, kv); ok {
				e.KVFill, e.HasKV = min(max(f, 0), 1), true
				break
			}
		}
		e.TTFT, e.HasTTFT = histogram(fams, n.ttft)
		if t, ok := sum(fams, "process_start_time_seconds"); ok && t > 0 && !math.IsInf(t, 0) {
			e.StartTime = t
		}
		e.MaxSeqs = infoLabel(fams, n.kind+":cache_config_info", "max_num_seqs")
		e.CacheTokens = cacheTokens(fams, n.kind+":cache_config_info")
		return e, nil
	}
	return Engine{}, ErrNoEngineMetrics
}

// infoLabel reads a positive integer label of an info-style gauge; 0 if
// absent or not a sane count.
func infoLabel(fams map[string]*dto.MetricFamily, name, label string) int {
	f := fams[name]
	if f == nil {
		return 0
	}
	for _, m := range f.Metric {
		if v, ok := labelValue(m, label); ok {
			if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 1<<20 {
				return n
			}
		}
	}
	return 0
}

// labelValue is the value of m's label name, and whether m has it.
func labelValue(m *dto.Metric, name string) (string, bool) {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue(), true
		}
	}
	return "", false
}

// cacheTokens reads the cache size from the block labels of an info gauge:
// per series (num_gpu_blocks + num_cpu_blocks) x block_size, summed and
// capped at telemetry.MaxCacheTokens. A series without a positive block_size and
// num_gpu_blocks counts as unknown and makes the whole answer 0; a missing
// or unparsable num_cpu_blocks (vLLM writes "None" without a host tier)
// counts as no host tier.
func cacheTokens(fams map[string]*dto.MetricFamily, name string) int {
	f := fams[name]
	if f == nil {
		return 0
	}
	var total int64
	for _, m := range f.Metric {
		block, gpu, cpu := labelCount(m, "block_size"), labelCount(m, "num_gpu_blocks"), labelCount(m, "num_cpu_blocks")
		if block <= 0 || gpu <= 0 {
			return 0
		}
		blocks := gpu + max(cpu, 0)
		if blocks > telemetry.MaxCacheTokens/block { // checked before multiplying: no overflow
			return telemetry.MaxCacheTokens
		}
		total = min(total+blocks*block, telemetry.MaxCacheTokens)
	}
	return int(total)
}

// labelCount is a label's value as a count in 0..telemetry.MaxCacheTokens; -1 if
// the label is absent or not such a count.
func labelCount(m *dto.Metric, label string) int64 {
	v, ok := labelValue(m, label)
	if !ok {
		return -1
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > telemetry.MaxCacheTokens {
		return -1
	}
	return n
}

// mean averages a family's samples (KV usage per engine instance).
func mean(fams map[string]*dto.MetricFamily, name string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var total float64
	n := 0
	for _, m := range f.Metric {
		if v, ok := value(m); ok {
			total += v
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return total / float64(n), true
}

// ErrNoGPUs is returned when a DCGM exposition holds no GPU.
var ErrNoGPUs = errors.New("scrape: no DCGM GPU metrics in the exposition")

// ParseDCGM reads a DCGM exporter's /metrics text into one GPUValues per
// GPU (the gpu label), in GPU order. A field a GPU lacks is left zero with
// its Has flag false.
func ParseDCGM(r io.Reader) ([]telemetry.GPUValues, error) {
	fams, err := parse(r)
	if err != nil {
		return nil, err
	}
	byGPU := map[int]*telemetry.GPUValues{}
	set := func(name string, apply func(g *telemetry.GPUValues, v float64)) {
		f := fams[name]
		if f == nil {
			return
		}
		for _, m := range f.Metric {
			v, ok := value(m)
			if !ok {
				continue
			}
			id, ok := gpuLabel(m)
			if !ok {
				continue
			}
			g := byGPU[id]
			if g == nil {
				g = &telemetry.GPUValues{GPU: id}
				byGPU[id] = g
			}
			apply(g, v)
		}
	}
	set("DCGM_FI_DEV_GPU_UTIL", func(g *telemetry.GPUValues, v float64) { g.UtilPct, g.Has.Util = v, true })
	set("DCGM_FI_DEV_FB_USED", func(g *telemetry.GPUValues, v float64) { g.FBUsedMiB, g.Has.FB = v, true })
	set("DCGM_FI_DEV_FB_FREE", func(g *telemetry.GPUValues, v float64) { g.FBFreeMiB = v })
	set("DCGM_FI_PROF_SM_OCCUPANCY", func(g *telemetry.GPUValues, v float64) { g.SMOccupancy, g.Has.SMOccupancy = v, true })
	set("DCGM_FI_PROF_SM_ACTIVE", func(g *telemetry.GPUValues, v float64) { g.SMActive, g.Has.SMActive = v, true })
	set("DCGM_FI_PROF_DRAM_ACTIVE", func(g *telemetry.GPUValues, v float64) { g.DRAMActive, g.Has.DRAMActive = v, true })
	set("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", func(g *telemetry.GPUValues, v float64) { g.TensorActive, g.Has.Tensor = v, true })
	set("DCGM_FI_DEV_GPU_TEMP", func(g *telemetry.GPUValues, v float64) { g.TempC, g.Has.Temp = v, true })
	set("DCGM_FI_DEV_SM_CLOCK", func(g *telemetry.GPUValues, v float64) { g.SMClockMHz, g.Has.Clock = v, true })
	set("DCGM_FI_DEV_MAX_SM_CLOCK", func(g *telemetry.GPUValues, v float64) { g.MaxClockMHz, g.Has.MaxClock = v, true })
	set("DCGM_FI_PROF_PCIE_TX_BYTES", func(g *telemetry.GPUValues, v float64) { g.PCIeTxBps, g.Has.PCIe = v, true })
	set("DCGM_FI_PROF_PCIE_RX_BYTES", func(g *telemetry.GPUValues, v float64) { g.PCIeRxBps, g.Has.PCIe = v, true })
	if len(byGPU) == 0 {
		return nil, ErrNoGPUs
	}
	ids := make([]int, 0, len(byGPU))
	for id := range byGPU {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]telemetry.GPUValues, len(ids))
	for i, id := range ids {
		out[i] = *byGPU[id]
	}
	return out, nil
}

// maxGPUs bounds the gpu label, so a hostile exposition cannot make the
// parser allocate per label value beyond reason.
const maxGPUs = 1 << 16

func gpuLabel(m *dto.Metric) (int, bool) {
	v, ok := labelValue(m, "gpu")
	if !ok {
		return 0, false
	}
	id, err := strconv.Atoi(v)
	return id, err == nil && id >= 0 && id < maxGPUs
}
