package study

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/workload"
)

// Windows are the phases of one sustainable-rate step: the class's traffic
// runs at a constant rate through all three; the turns sent in Measure are
// the step's sample, and Cooldown gives them time to end.
type Windows struct {
	Warmup   time.Duration `json:"warmup"`
	Measure  time.Duration `json:"measure"`
	Cooldown time.Duration `json:"cooldown"`
}

// DefaultWindows are the Solyx AI Grid paper's step: 30 s of warm-up, 45 s measured
// and 15 s of cool-down.
func DefaultWindows() Windows {
	return Windows{Warmup: 30 * time.Second, Measure: 45 * time.Second, Cooldown: 15 * time.Second}
}

// StepSpec is one step of a sustainable-rate search: a workload class at a
// constant rate under a policy.
type StepSpec struct {
	Class  *workload.Class
	Policy string
	Rate   float64
	Seed   uint64
	Windows
}

// StepFigures are one step's raw figures. The sample is the turns sent in
// the measured window: each one completed, failed (after all its attempts)
// or was still unfinished when the cool-down ended.
type StepFigures struct {
	Rate       float64 `json:"rate"`
	Sent       int     `json:"sent"`
	Completed  int     `json:"completed"`
	Failed     int     `json:"failed"`
	Unfinished int     `json:"unfinished"`
	Rejections int     `json:"rejections"`
	// Success is Completed / (Completed + Failed): unfinished turns count in
	// neither (they are what a load generator cancels when it stops).
	Success float64 `json:"success"`
	// TTFT percentiles in seconds over every sampled turn that got a first
	// token, and the unfinished ones that did not, each at the time it had
	// waited when the run ended (a lower bound, longer than the cool-down).
	TTFTP50S float64 `json:"ttft_p50_s"`
	TTFTP95S float64 `json:"ttft_p95_s"`
	TTFTP99S float64 `json:"ttft_p99_s"`
	ReusePct float64 `json:"reuse_pct"`
	// Events and WallS describe a simulated step; a live runner leaves
	// Events 0.
	Events uint64  `json:"events,omitempty"`
	WallS  float64 `json:"wall_s"`
}

// Samples is the number of turns the step's verdict rests on.
func (f *StepFigures) Samples() int { return f.Completed + f.Failed + f.Unfinished }

// Sustains reports whether the step met the SLO: P95 TTFT within slo and
// a success rate of at least minSuccess, over a sample that is not empty.
func (f *StepFigures) Sustains(slo time.Duration, minSuccess float64) bool {
	return f.Completed > 0 && f.TTFTP95S <= slo.Seconds() && f.Success >= minSuccess
}

// Figures computes a step's raw figures from its measured turns: those
// that ended and those still running at the end.
func Figures(rate float64, ended, unfinished []metrics.TurnRecord) StepFigures {
	f := StepFigures{Rate: rate, Sent: len(ended) + len(unfinished), Unfinished: len(unfinished)}
	ttfts := make([]float64, 0, len(ended)+len(unfinished))
	var prompt, cached int64
	for i := range ended {
		r := &ended[i]
		f.Rejections += r.Rejections
		if !r.Completed {
			f.Failed++
			continue
		}
		f.Completed++
		ttfts = append(ttfts, r.TTFT().Seconds())
		prompt += int64(r.PromptTokens)
		cached += int64(r.CachedTokens)
	}
	for i := range unfinished {
		r := &unfinished[i]
		f.Rejections += r.Rejections
		if r.FirstToken > 0 {
			ttfts = append(ttfts, r.TTFT().Seconds())
		} else {
			ttfts = append(ttfts, (r.End - r.Start).Seconds())
		}
	}
	if n := f.Completed + f.Failed; n > 0 {
		f.Success = float64(f.Completed) / float64(n)
	}
	if prompt > 0 {
		f.ReusePct = 100 * float64(cached) / float64(prompt)
	}
	slices.Sort(ttfts)
	f.TTFTP50S, f.TTFTP95S, f.TTFTP99S = metrics.Percentile(ttfts, 0.5), metrics.Percentile(ttfts, 0.95), metrics.Percentile(ttfts, 0.99)
	return f
}

// Runner measures sustainable-rate steps. The simulator's runner is
// SimRunner; a live runner drives a real fleet with the same StepSpec and
// returns the same figures (Figures turns its turn records into them).
// A runner used with SLOMatrixOptions.Parallel > 1 must be safe for
// concurrent use.
type Runner interface {
	Step(ctx context.Context, spec StepSpec) (StepFigures, error)
}

// SimRunner runs steps in the simulator on a fleet. It is safe for
// concurrent use.
type SimRunner struct {
	Fleet    *config.Fleet
	Registry *policy.Registry
	// Engine, if set, replaces the fleet's default engine profile.
	Engine string
}

var _ Runner = (*SimRunner)(nil)

// Step implements Runner.
func (r *SimRunner) Step(ctx context.Context, spec StepSpec) (StepFigures, error) {
	if spec.Class == nil {
		return StepFigures{}, errors.New("study: a step needs a workload class")
	}
	cfg, err := r.Fleet.SimConfig(config.Run{Policy: spec.Policy, RPS: spec.Rate, Seed: spec.Seed, Engine: r.Engine,
		Warmup: spec.Warmup, Measure: spec.Measure, Cooldown: spec.Cooldown, Class: spec.Class.Name}, r.Registry)
	if err != nil {
		return StepFigures{}, err
	}
	cfg.KeepRecords = true
	// Heartbeats with signals and probes, as a live fleet has them: every
	// policy gets them, and only the policy decides whether to read them
	// (pressure does; without them it places as pulsar-waw).
	cfg.Telemetry = sim.DefaultTelemetry()
	start := time.Now()
	res, err := sim.Run(ctx, cfg, r.Registry)
	if err != nil {
		return StepFigures{}, err
	}
	f := Figures(spec.Rate, res.Records, res.Unfinished)
	f.Events, f.WallS = res.Events, time.Since(start).Seconds()
	return f, nil
}

// Capacity estimates how many requests/s of a class each backend of a fleet
// can serve, from its engine profile: a request costs its prompt's new
// tokens in prefill and its output tokens in decode, each decode step's base
// cost shared by a full batch. A perfect prefix cache is assumed, so the
// estimate is an upper bound for session classes. Backends are in the
// fleet's order.
func Capacity(cfg *sim.Config, c *workload.Class) []float64 {
	out := make([]float64, len(cfg.Backends))
	for i, b := range cfg.Backends {
		p := b.Profile
		ms := c.MeanNewPromptTokens*p.PerPrefillTokenMs + c.MeanOutputTokens*(p.PerDecodeSeqMs+p.BaseMs/float64(p.MaxSeqs))
		out[i] = float64(b.Workers) * 1000 / ms
	}
	return out
}

// CapacityRatio is the whole fleet's capacity for a class over the part of
// it an equal split (round-robin's) can use, which ends where the slowest
// backend saturates: n times the smallest capacity. When a request costs
// the same wherever it goes, it is what a split by capacity gains over an
// equal one (measured ratios land near it, a little above when the equal
// split's knee falls further short of saturation than the other's). Only
// a request that costs less on some backends than on others (a prefix
// cache hit) can take a policy past it.
func CapacityRatio(capacity []float64) float64 {
	if len(capacity) == 0 {
		return 0
	}
	var sum float64
	for _, c := range capacity {
		sum += c
	}
	return sum / (float64(len(capacity)) * slices.Min(capacity))
}

// ParseTiers reads a comma-separated list of SLO tiers (1-3).
func ParseTiers(s string) ([]int, error) {
	var tiers []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		switch p {
		case "1", "2", "3":
			t := int(p[0] - '0')
			if !slices.Contains(tiers, t) {
				tiers = append(tiers, t)
			}
		default:
			return nil, fmt.Errorf("SLO tier %q: want 1, 2 or 3", p)
		}
	}
	if len(tiers) == 0 {
		return nil, errors.New("no SLO tier given: want 1, 2 or 3, comma separated")
	}
	slices.Sort(tiers)
	return tiers, nil
}

// bracket is the search range of a class: from a 64th of the fleet's
// estimated capacity to 1.25 times it.
func bracket(capacity []float64) (lo, hi float64) {
	var sum float64
	for _, c := range capacity {
		sum += c
	}
	hi = 1.25 * sum
	return hi / 64, hi
}

// median of values (the mean of the middle two for an even count).
func median(values []float64) float64 {
	if len(values) == 0 {
		return math.NaN()
	}
	v := slices.Clone(values)
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}
