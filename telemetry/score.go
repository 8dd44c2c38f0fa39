package telemetry

import (
	"errors"
	"fmt"
)

// Weights weigh the pressures in the score.
type Weights [NumSignals]float64

// DefaultWeights are the score's first weights. They were fixed, with the
// normalisation levels of DefaultNorm, before any measurement; they are the
// start of the pressure policy's tuning search, whose result
// (policy.DefaultPressureParams) the policy uses by default:
//
//	queue 0.25, ttft 0.25, kv 0.10, gpu 0.05, mem 0.05, sm 0.05, dram 0.05   (load: 0.80 in all)
//	errors 1.00      one signal alone can take a backend to the minimum weight
//	thermal 0.60     a throttling GPU loses most of its share before it slows
//	rtt 0.10, jitter 0.25
//
// Load weighs 0.80 in all, so a saturated backend keeps a fifth of its
// weight: pressure should spread load, not starve a busy backend. Errors and
// heat are not load: a failing or overheating backend should lose its
// traffic however idle it looks, and an error answered fast must never make a
// backend look idle (the failure of least-request the Solyx AI Grid paper describes).
func DefaultWeights() Weights {
	var w Weights
	w[SigQueue], w[SigTTFT], w[SigKV] = 0.25, 0.25, 0.10
	w[SigGPU], w[SigMem], w[SigSM], w[SigDRAM] = 0.05, 0.05, 0.05, 0.05
	w[SigErrors], w[SigThermal] = 1.0, 0.60
	w[SigRTT], w[SigJitter] = 0.10, 0.25
	return w
}

// The bounds of a weight other than 0. Within them the score's arithmetic
// stays finite: eleven weights sum to at most 1.1e10, and a missing load
// signal's weight handed to the smallest one scales it by at most 1.1e19;
// beyond them (two weights of 1e308 summing to +Inf, 1e300 handed to
// 1e-300) a score could be +Inf times 0, NaN. No useful setting is near
// them: only the weights' ratios and the score's cap at 1 matter.
const (
	MinWeight = 1e-9
	MaxWeight = 1e9
)

// Validate reports a weight that is not 0 or between MinWeight and
// MaxWeight (negative, NaN, infinite, absurdly large or small).
func (w Weights) Validate() error {
	var errs []error
	for s, v := range w {
		if v != 0 && !(v >= MinWeight && v <= MaxWeight) {
			errs = append(errs, fmt.Errorf("weight of %s must be 0 or between %g and %g, got %v", Signal(s), MinWeight, MaxWeight, v))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("telemetry weights: %w", err)
	}
	return nil
}

// Load reports whether s measures load (and so may stand in for another load
// signal that is missing).
func (s Signal) Load() bool { return loadSignal(s) }

func loadSignal(s Signal) bool {
	switch s {
	case SigQueue, SigTTFT, SigKV, SigGPU, SigMem, SigSM, SigDRAM:
		return true
	}
	return false
}

// Score is the weighted sum of the available pressures, at most 1. Load
// signals that are missing (the hardware ones when the DCGM exporter is down)
// hand their weight to the load signals that remain, in proportion, so a
// backend whose exporter died looks neither idler nor busier than it is; the
// thermal pressure has no stand-in and is simply lost. fallback reports that
// the hardware source was missing.
func Score(p Pressures, avail [NumSignals]bool, w Weights) (score float64, fallback bool) {
	var loadAll, loadAvail float64
	for s := range NumSignals {
		if loadSignal(s) {
			loadAll += w[s]
			if avail[s] {
				loadAvail += w[s]
			}
		}
	}
	scale := 1.0
	if loadAvail > 0 {
		scale = loadAll / loadAvail
	}
	for s := range NumSignals {
		if !avail[s] {
			continue
		}
		// The explicit conversions round every product, so no
		// architecture fuses a multiply and an add: the score is the same
		// bits everywhere (and the same as Scorer's).
		v := float64(w[s] * clamp01(p[s]))
		if loadSignal(s) {
			v = float64(v * scale)
		}
		score += v
	}
	return min(score, 1), !avail[SigGPU]
}

// Projector turns scores into integer weights with hysteresis.
type Projector struct {
	// Max is the weight of a backend under no pressure; Min that of one
	// under full pressure (at least 1: a zero weight would be no weight).
	Max int `yaml:"max" json:"max"`
	Min int `yaml:"min" json:"min"`
	// Hysteresis is the least change of weight that is applied; smaller
	// moves keep the current weight, so noise does not move sessions.
	Hysteresis int `yaml:"hysteresis" json:"hysteresis"`
}

// MaxCacheTokens bounds an engine's KV cache size, in tokens (GPU and host
// tier together), wherever it is read: from the engine's metrics by the
// gateway (scrape.Engine.CacheTokens) and from a gateway's stats by a
// router (wire.Stats.CacheTokens): 2^31-1, beyond any one engine's cache.
// The prefix policy's index takes memory only as blocks are inserted,
// never up front by capacity, so the bound limits how much a lying gateway
// makes a router's index retain, not what it allocates.
const MaxCacheTokens = 1<<31 - 1

// DefaultProjector gives weights 1-100 that move in steps of at least 10.
func DefaultProjector() Projector { return Projector{Max: 100, Min: 1, Hysteresis: 10} }

// MaxLevel bounds a projector's Max: the pressure policy's weight is a
// backend's capacity times its level, which must stay far inside int64
// (capacity up to 9e12 at this level).
const MaxLevel = 1_000_000

// Validate reports what is wrong with the projector.
func (p Projector) Validate() error {
	if p.Min < 1 || p.Max < p.Min || p.Max > MaxLevel || p.Hysteresis < 0 || p.Hysteresis > p.Max {
		return fmt.Errorf("telemetry projector: want 1 <= min <= max <= %d and 0 <= hysteresis <= max, got min %d max %d hysteresis %d", MaxLevel, p.Min, p.Max, p.Hysteresis)
	}
	return nil
}

// Target is the weight a score maps to, without hysteresis.
func (p Projector) Target(score float64) int {
	w := roundNonNegative(float64(p.Max) * (1 - clamp01(score)))
	return min(max(w, p.Min), p.Max)
}

// roundNonNegative is int(math.Round(x)) for x >= 0, with a truncation and a
// comparison instead of math.Round's bit manipulation: below 2^52 the
// fraction x - trunc(x) is exact, so rounding half up is exact too, and from
// 2^52 on every float is an integer that math.Round returns as it is.
func roundNonNegative(x float64) int {
	n := int(x)
	if x < 1<<52 && x-float64(n) >= 0.5 {
		n++
	}
	return n
}

// Project returns the weight to use given the current one (0: none yet). A
// move to the minimum or the maximum always applies, so a backend that
// fails is dropped at once and one that recovers fully is restored.
func (p Projector) Project(current int, score float64) int {
	t := p.Target(score)
	if current <= 0 || t == p.Min || t == p.Max || abs(t-current) >= p.Hysteresis {
		return t
	}
	return current
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
