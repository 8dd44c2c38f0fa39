package plan

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/engine"
)

// Profile is one serving instance (a model on a GPU or a tensor-parallel
// group of GPUs, with its serving configuration), mapped onto the engine's
// step-cost model for a pool. Exactly one of Engine, Manual and Computed is
// set.
type Profile struct {
	Name string `yaml:"name" json:"name"`
	// Engine is a fixed step-cost model; CostPerHr must be set with it.
	Engine   *engine.Profile `yaml:"engine,omitempty" json:"engine,omitempty"`
	Manual   *Manual         `yaml:"manual,omitempty" json:"manual,omitempty"`
	Computed *Computed       `yaml:"computed,omitempty" json:"computed,omitempty"`
	// CostPerHr is the hourly cost of one instance (Engine profiles; the
	// others carry their own).
	CostPerHr float64 `yaml:"cost_per_hr,omitempty" json:"cost_per_hr,omitempty"`
	// Doc says where the numbers come from.
	Doc string `yaml:"doc,omitempty" json:"doc,omitempty"`
}

// Manual is a profile of measured or estimated constants, as in the
// planner this one follows: at n active sequences of mean length L an
// iteration takes W + H * L / calibration_ctx * n seconds.
type Manual struct {
	W              float64 `yaml:"w" json:"w"` // base iteration latency, seconds
	H              float64 `yaml:"h" json:"h"` // per-sequence latency at calibration_ctx, seconds
	CalibrationCtx int     `yaml:"calibration_ctx" json:"calibration_ctx"`
	Chunk          int     `yaml:"chunk" json:"chunk"`       // prefill tokens per iteration
	BlkSize        int     `yaml:"blk_size" json:"blk_size"` // tokens per KV block
	TotalKVBlks    int     `yaml:"total_kv_blks" json:"total_kv_blks"`
	MaxSlots       int     `yaml:"max_slots" json:"max_slots"` // concurrency at calibration_ctx
	CostPerHr      float64 `yaml:"cost_per_hr" json:"cost_per_hr"`
}

// Hardware is one GPU.
type Hardware struct {
	Name         string  `yaml:"name" json:"name"`
	TFLOPS       float64 `yaml:"tflops" json:"tflops"` // dense, at the serving dtype
	BandwidthGBs float64 `yaml:"bandwidth_gbs" json:"bandwidth_gbs"`
	MemoryGB     float64 `yaml:"memory_gb" json:"memory_gb"`
	CostPerHr    float64 `yaml:"cost_per_hr" json:"cost_per_hr"` // per GPU
}

// Model is a dense transformer.
type Model struct {
	Name    string  `yaml:"name" json:"name"`
	ParamsB float64 `yaml:"params_b" json:"params_b"` // billions of parameters
	Layers  int     `yaml:"layers" json:"layers"`
	Hidden  int     `yaml:"hidden" json:"hidden"`
	KVHeads int     `yaml:"kv_heads" json:"kv_heads"`
	HeadDim int     `yaml:"head_dim" json:"head_dim"`
}

// Serving is how the model is served on the hardware.
type Serving struct {
	TP           int     `yaml:"tp" json:"tp"`                             // GPUs per instance (tensor parallel)
	WeightBytes  float64 `yaml:"weight_bytes" json:"weight_bytes"`         // bytes per parameter (2 for bf16)
	KVBytes      float64 `yaml:"kv_bytes" json:"kv_bytes"`                 // bytes per KV element
	Chunk        int     `yaml:"chunk" json:"chunk"`                       // tokens per step
	KVUtil       float64 `yaml:"kv_util" json:"kv_util"`                   // share of GPU memory the server may use
	MaxSlots     int     `yaml:"max_slots" json:"max_slots"`               // sequences at once
	MFU          float64 `yaml:"mfu" json:"mfu"`                           // achieved share of peak FLOPs in prefill
	BWUtil       float64 `yaml:"bw_util" json:"bw_util"`                   // achieved share of peak bandwidth
	StepOverhead float64 `yaml:"step_overhead_ms" json:"step_overhead_ms"` // host and launch cost per step
}

// Computed derives a profile from hardware, model and serving configuration.
type Computed struct {
	Hardware Hardware `yaml:"hardware" json:"hardware"`
	Model    Model    `yaml:"model" json:"model"`
	Serving  Serving  `yaml:"serving" json:"serving"`
}

// PoolShape is what a profile needs to know about the requests of the pool
// it serves.
type PoolShape struct {
	// MeanInput is the mean prompt length; MeanContext the mean context a
	// decode step reads (prompt plus half the output); MaxTokens the pool's
	// largest request.
	MeanInput, MeanContext float64
	MaxTokens              int
}

// Validate reports what is wrong with a profile.
func (p *Profile) Validate() error {
	var errs []error
	set := 0
	for _, b := range []bool{p.Engine != nil, p.Manual != nil, p.Computed != nil} {
		if b {
			set++
		}
	}
	if set != 1 {
		errs = append(errs, errors.New("give exactly one of engine, manual and computed"))
	}
	if p.Engine != nil {
		if err := p.Engine.Validate(); err != nil {
			errs = append(errs, err)
		}
		if !(p.CostPerHr > 0) || math.IsInf(p.CostPerHr, 0) {
			errs = append(errs, fmt.Errorf("cost_per_hr must be a finite number > 0, got %v", p.CostPerHr))
		}
	}
	if m := p.Manual; m != nil {
		pos := func(name string, v float64) {
			if !(v > 0) || math.IsInf(v, 0) {
				errs = append(errs, fmt.Errorf("manual.%s must be a finite number > 0, got %v", name, v))
			}
		}
		pos("w", m.W)
		pos("cost_per_hr", m.CostPerHr)
		if !(m.H >= 0) || math.IsInf(m.H, 0) {
			errs = append(errs, fmt.Errorf("manual.h must be a finite number >= 0, got %v", m.H))
		}
		for name, v := range map[string]int{"calibration_ctx": m.CalibrationCtx, "chunk": m.Chunk, "blk_size": m.BlkSize,
			"total_kv_blks": m.TotalKVBlks, "max_slots": m.MaxSlots} {
			if v < 1 {
				errs = append(errs, fmt.Errorf("manual.%s must be >= 1, got %d", name, v))
			}
		}
		if m.Chunk > 0 && m.Chunk < 2 {
			errs = append(errs, fmt.Errorf("manual.chunk must be >= 2, got %d", m.Chunk))
		}
		if m.BlkSize > 0 && m.TotalKVBlks > math.MaxInt32/m.BlkSize {
			errs = append(errs, errors.New("manual: blk_size x total_kv_blks is too large"))
		}
	}
	if c := p.Computed; c != nil {
		errs = append(errs, c.validate()...)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("profile %q: %w", p.Name, err)
	}
	return nil
}

func (c *Computed) validate() []error {
	var errs []error
	pos := func(name string, v float64) {
		if !(v > 0) || math.IsInf(v, 0) {
			errs = append(errs, fmt.Errorf("computed.%s must be a finite number > 0, got %v", name, v))
		}
	}
	h, m, s := c.Hardware, c.Model, c.Serving
	pos("hardware.tflops", h.TFLOPS)
	pos("hardware.bandwidth_gbs", h.BandwidthGBs)
	pos("hardware.memory_gb", h.MemoryGB)
	pos("hardware.cost_per_hr", h.CostPerHr)
	pos("model.params_b", m.ParamsB)
	pos("serving.weight_bytes", s.WeightBytes)
	pos("serving.kv_bytes", s.KVBytes)
	for name, v := range map[string]float64{"serving.kv_util": s.KVUtil, "serving.mfu": s.MFU, "serving.bw_util": s.BWUtil} {
		if !(v > 0 && v <= 1) {
			errs = append(errs, fmt.Errorf("computed.%s must be in (0, 1], got %v", name, v))
		}
	}
	if !(s.StepOverhead >= 0) || math.IsInf(s.StepOverhead, 0) {
		errs = append(errs, fmt.Errorf("computed.serving.step_overhead_ms must be a finite number >= 0, got %v", s.StepOverhead))
	}
	for name, v := range map[string]int{"model.layers": m.Layers, "model.hidden": m.Hidden, "model.kv_heads": m.KVHeads,
		"model.head_dim": m.HeadDim, "serving.tp": s.TP, "serving.chunk": s.Chunk, "serving.max_slots": s.MaxSlots} {
		if v < 1 || v > 1<<24 {
			errs = append(errs, fmt.Errorf("computed.%s must be 1-%d, got %d", name, 1<<24, v))
		}
	}
	if len(errs) == 0 && c.kvTokens() < 1 {
		errs = append(errs, fmt.Errorf("computed: the weights (%.1f GB) leave no KV room in %d x %.0f GB x kv_util %.2f",
			c.weightBytes()/1e9, s.TP, h.MemoryGB, s.KVUtil))
	}
	return errs
}

func (c *Computed) weightBytes() float64 { return c.Model.ParamsB * 1e9 * c.Serving.WeightBytes }

// kvBytesPerToken is the KV of one token over all layers (K and V).
func (c *Computed) kvBytesPerToken() float64 {
	m := c.Model
	return 2 * float64(m.Layers) * float64(m.KVHeads) * float64(m.HeadDim) * c.Serving.KVBytes
}

func (c *Computed) kvTokens() int {
	s := c.Serving
	free := c.Hardware.MemoryGB*1e9*float64(s.TP)*s.KVUtil - c.weightBytes()
	return int(min(free/c.kvBytesPerToken(), math.MaxInt32))
}

// KVBytesPerToken is the KV size of one token, for the KV transfer of a
// disaggregated deployment (0 for profiles without a model).
func (p *Profile) KVBytesPerToken() float64 {
	if p.Computed == nil {
		return 0
	}
	return p.Computed.kvBytesPerToken()
}

// Cost is the hourly cost of one instance.
func (p *Profile) Cost() float64 {
	switch {
	case p.Manual != nil:
		return p.Manual.CostPerHr
	case p.Computed != nil:
		return p.Computed.Hardware.CostPerHr * float64(p.Computed.Serving.TP)
	}
	return p.CostPerHr
}

// EngineFor maps the profile onto the engine's step-cost model
//
//	step = base + per_decode_seq * decoding + per_prefill_token * prefill_tokens
//
// for a pool of the given shape:
//
//   - Engine: as given.
//   - Manual: base = W; per_decode_seq = H_eff = H * MeanContext /
//     calibration_ctx; per_prefill_token = H_eff / chunk (a prefilling
//     sequence costs H_eff per full chunk, as a decoding one costs H_eff per
//     step: the manual model's one iteration rule); KV tokens = blk_size x
//     total_kv_blks; sequences = max_slots, scaled by calibration_ctx /
//     MaxTokens for a pool of longer requests, and below chunk.
//   - Computed: one instance of TP GPUs. base = weights / (bandwidth x
//     bw_util) + step overhead (a decode step reads every weight once);
//     per_decode_seq = (MeanContext x KV bytes per token) / (bandwidth x
//     bw_util) + 2 x params / (FLOPs x mfu) (memory-bound decode: each
//     sequence reads its KV); per_prefill_token = (2 x params + 2 x layers x
//     hidden x MeanInput) / (FLOPs x mfu) (weights and causal attention);
//     KV tokens = (memory x TP x kv_util - weights) / KV bytes per token. The
//     roofline of a step is max(memory time, compute time); the linear
//     model adds them, which overstates a step at the ridge point by at most
//     2x and is exact far from it.
func (p *Profile) EngineFor(shape PoolShape) engine.Profile {
	switch {
	case p.Engine != nil:
		e := *p.Engine
		e.Name = p.Name
		return e
	case p.Manual != nil:
		m := p.Manual
		hEff := m.H * shape.MeanContext / float64(m.CalibrationCtx)
		slots := m.MaxSlots
		if shape.MaxTokens > m.CalibrationCtx {
			slots = max(1, int(int64(m.MaxSlots)*int64(m.CalibrationCtx)/int64(shape.MaxTokens)))
		}
		return engine.Profile{Name: p.Name, BaseMs: max(m.W*1000, engine.MinBaseMs), PerDecodeSeqMs: hEff * 1000,
			PerPrefillTokenMs: hEff * 1000 / float64(m.Chunk), KVTokens: m.BlkSize * m.TotalKVBlks,
			MaxSeqs: max(1, min(slots, m.Chunk-1)), PrefillChunk: m.Chunk}
	}
	c := p.Computed
	s := c.Serving
	bw := c.Hardware.BandwidthGBs * 1e9 * float64(s.TP) * s.BWUtil
	flops := c.Hardware.TFLOPS * 1e12 * float64(s.TP) * s.MFU
	params := c.Model.ParamsB * 1e9
	return engine.Profile{Name: p.Name,
		BaseMs:            max(c.weightBytes()/bw*1000+s.StepOverhead, engine.MinBaseMs),
		PerDecodeSeqMs:    (shape.MeanContext*c.kvBytesPerToken()/bw + 2*params/flops) * 1000,
		PerPrefillTokenMs: (2*params + 2*float64(c.Model.Layers)*float64(c.Model.Hidden)*shape.MeanInput) / flops * 1000,
		KVTokens:          c.kvTokens(), MaxSeqs: max(1, min(s.MaxSlots, s.Chunk-1)), PrefillChunk: s.Chunk}
}

// ParseProfile decodes a profile file (YAML, strict): a name, cost_per_hr
// and one of engine (the engine's own fields), manual or computed.
func ParseProfile(name string, data []byte) (*Profile, error) {
	var p Profile
	if err := config.DecodeStrict("profile file "+name, data, &p); err != nil {
		return nil, err
	}
	if p.Name == "" {
		p.Name = strings.TrimSuffix(strings.TrimSuffix(name[strings.LastIndexAny(name, `/\`)+1:], ".yaml"), ".yml")
	}
	if p.Engine != nil && p.Engine.PrefillChunk == 0 {
		p.Engine.PrefillChunk = engine.DefaultPrefillChunk
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Hardware, models and serving defaults of the presets. Peak figures are
// the vendors' dense (no sparsity) BF16 numbers; hourly costs are
// illustrative on-demand cloud prices per GPU: replace them with yours.
var (
	h100 = Hardware{Name: "H100-SXM-80GB", TFLOPS: 989, BandwidthGBs: 3350, MemoryGB: 80, CostPerHr: 4.00}
	a100 = Hardware{Name: "A100-SXM-80GB", TFLOPS: 312, BandwidthGBs: 2039, MemoryGB: 80, CostPerHr: 2.50}
	l4   = Hardware{Name: "L4-24GB", TFLOPS: 121, BandwidthGBs: 300, MemoryGB: 24, CostPerHr: 0.80}

	llama8b  = Model{Name: "Llama-3.1-8B", ParamsB: 8.03, Layers: 32, Hidden: 4096, KVHeads: 8, HeadDim: 128}
	llama70b = Model{Name: "Llama-3.1-70B", ParamsB: 70.6, Layers: 80, Hidden: 8192, KVHeads: 8, HeadDim: 128}
)

// DefaultServing is vLLM-like serving in BF16: 2,048 tokens a step, 90% of
// memory, 256 sequences, 50% of peak FLOPs in prefill, 80% of peak
// bandwidth, 2 ms of host overhead a step.
func DefaultServing(tp int) Serving {
	return Serving{TP: tp, WeightBytes: 2, KVBytes: 2, Chunk: 2048, KVUtil: 0.9, MaxSlots: 256, MFU: 0.5, BWUtil: 0.8, StepOverhead: 2}
}

// CalibratedServing is DefaultServing with 0.5 ms of host overhead a step
// instead of 2, the one change that brings the roofline's decode step
// within 7% of published vLLM measurements of Llama-3.1-8B at small batches
// (docs/PLANNING.md, "GPU presets against published measurements"): an H100
// 80GB at 1 and 4 concurrent requests (InferenceBench's concurrency-sweep
// recipe, vLLM 0.21.0) and an A100 40GB at 1 and 8 (a vLLM 0.23.0 sweep
// published by John Musgrave, 1,024 input and 128 output tokens).
func CalibratedServing(tp int) Serving {
	s := DefaultServing(tp)
	s.StepOverhead = 0.5
	return s
}

// Presets are the built-in profiles, by name.
func Presets() map[string]*Profile {
	half, full := engine.HalfProfile(), engine.FullProfile()
	comp := func(name string, h Hardware, m Model, tp int) *Profile {
		return &Profile{Name: name, Computed: &Computed{Hardware: h, Model: m, Serving: DefaultServing(tp)},
			Doc: fmt.Sprintf("computed: %s on %d x %s, BF16, DefaultServing", m.Name, tp, h.Name)}
	}
	return map[string]*Profile{
		"half": {Name: "half", Engine: &half, CostPerHr: 1,
			Doc: "engine: the routing study's half-scale worker; cost 1 a GPU-hour (a unit, not a price)"},
		"full": {Name: "full", Engine: &full, CostPerHr: 1,
			Doc: "engine: the full-scale worker; cost 1 a GPU-hour (a unit, not a price)"},
		"h100-llama3.1-8b":    comp("h100-llama3.1-8b", h100, llama8b, 1),
		"a100-llama3.1-8b":    comp("a100-llama3.1-8b", a100, llama8b, 1),
		"l4-llama3.1-8b":      comp("l4-llama3.1-8b", l4, llama8b, 1),
		"h100x4-llama3.1-70b": comp("h100x4-llama3.1-70b", h100, llama70b, 4),
		"h100-llama3.1-8b-cal": {Name: "h100-llama3.1-8b-cal", Computed: &Computed{Hardware: h100, Model: llama8b, Serving: CalibratedServing(1)},
			Doc: "computed: Llama-3.1-8B on 1 x H100-SXM-80GB, BF16, CalibratedServing (0.5 ms a step; within 2% of vLLM 0.21's measured decode step at 1 and 4 requests)"},
		"a100-llama3.1-8b-cal": {Name: "a100-llama3.1-8b-cal", Computed: &Computed{Hardware: a100, Model: llama8b, Serving: CalibratedServing(1)},
			Doc: "computed: Llama-3.1-8B on 1 x A100-SXM-80GB, BF16, CalibratedServing (0.5 ms a step; its formula within 7% of vLLM 0.23's measured decode step on an A100 40GB at 1 and 8 requests)"},
		"manual-a100-llama-8b": {Name: "manual-a100-llama-8b", Doc: "manual: illustrative constants of the shape a load test gives, close to a100-llama3.1-8b",
			Manual: &Manual{W: 0.012, H: 0.00012, CalibrationCtx: 2048, Chunk: 2048, BlkSize: 16, TotalKVBlks: 33_000, MaxSlots: 256, CostPerHr: 2.50}},
	}
}

// PresetNames lists the presets in order.
func PresetNames() []string {
	names := make([]string, 0, 8)
	for n := range Presets() {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset returns a built-in profile.
func Preset(name string) (*Profile, bool) {
	p, ok := Presets()[name]
	return p, ok
}
