package plan

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// DisaggConstants are the disaggregated model's assumptions, stated and
// configurable: the seed planner's factors by default.
type DisaggConstants struct {
	// PrefillDegrade and DecodeDegrade scale each phase's ideal throughput
	// (0.90 and 0.92): scheduling and transfer overheads the model does not
	// derive.
	PrefillDegrade float64 `json:"prefill_degrade"`
	DecodeDegrade  float64 `json:"decode_degrade"`
	// TTFTFactor multiplies the idle prefill time of a mean prompt for the
	// TTFT estimate (1.8): queueing at the prefill workers and the hand-off.
	TTFTFactor float64 `json:"ttft_factor"`
	// LinkGBs is the KV transfer bandwidth between a prefill and a decode
	// worker in GB/s; 0 leaves the transfer out. It needs a computed
	// profile (one that knows the KV bytes per token).
	LinkGBs float64 `json:"link_gbs"`
}

// DefaultDisagg are the seed planner's constants with no KV transfer term.
func DefaultDisagg() DisaggConstants {
	return DisaggConstants{PrefillDegrade: 0.90, DecodeDegrade: 0.92, TTFTFactor: 1.80}
}

// DisaggPoint is one (prefill, decode) worker count.
type DisaggPoint struct {
	Prefill, Decode int
	// ThroughputRPS is min(prefill x R_p, decode x R_d).
	ThroughputRPS float64 `json:"throughput_rps"`
	Cost          float64 `json:"cost_per_hr"`
	// Feasible: the rate stays under the utilization cap in both phases.
	Feasible bool `json:"feasible"`
}

// Disagg is the phase model's result.
type Disagg struct {
	Profile   string          `json:"profile"`
	Constants DisaggConstants `json:"constants"`
	// PrefillRPS and DecodeRPS are one worker's request rates per phase.
	PrefillRPS float64 `json:"prefill_rps_per_worker"`
	DecodeRPS  float64 `json:"decode_rps_per_worker"`
	// TTFT is the estimate: TTFTFactor x idle prefill of a mean prompt +
	// KV transfer.
	TTFT     Sec  `json:"ttft_estimate_s"`
	TTFTMeet bool `json:"ttft_meets_slo"`
	// Prefill and Decode are the fewest workers that carry the rate.
	Prefill, Decode int
	Cost            float64       `json:"cost_per_hr"`
	Grid            []DisaggPoint `json:"grid"`
	// Aggregated is the analytical single-pool fleet of the same profile,
	// for comparison.
	Aggregated Candidate `json:"aggregated"`
}

// Disaggregate sizes a prefill/decode-disaggregated deployment of profile
// p at the workload's rate. A prefill worker runs full chunks of prompt:
// R_p = PrefillDegrade x chunk / step(0, chunk) / E[in]. A decode worker
// runs its slots decoding: R_d = DecodeDegrade x slots / step(slots, 0) /
// E[out]. The fleet carries lambda when lambda <= cap x P x R_p and lambda
// <= cap x D x R_d. It does not simulate transfers, topology or phase
// queues; no DES runs it.
func (pl *Planner) Disaggregate(p *Profile, k DisaggConstants) (*Disagg, error) {
	for name, v := range map[string]float64{"prefill degrade": k.PrefillDegrade, "decode degrade": k.DecodeDegrade} {
		if !(v > 0 && v <= 1) {
			return nil, fmt.Errorf("plan: %s must be in (0, 1], got %v", name, v)
		}
	}
	if !(k.TTFTFactor >= 1) || math.IsInf(k.TTFTFactor, 0) || !(k.LinkGBs >= 0) || math.IsInf(k.LinkGBs, 0) {
		return nil, fmt.Errorf("plan: the TTFT factor must be a finite number >= 1 and the link bandwidth >= 0, got %v and %v", k.TTFTFactor, k.LinkGBs)
	}
	if k.LinkGBs > 0 && p.KVBytesPerToken() == 0 {
		return nil, errors.New("plan: a KV transfer term needs a computed profile (it knows the KV bytes per token)")
	}
	long := pl.w.MaxTokens()
	m, err := NewPoolModel("all", p, pl.samples, 0, long)
	if err != nil {
		return nil, err
	}
	e := m.Engine
	chunk := e.PrefillChunk
	meanIn, meanOut := 0.0, 0.0
	for _, s := range pl.samples {
		meanIn += float64(s.In)
		meanOut += float64(s.Out)
	}
	meanIn /= float64(len(pl.samples))
	meanOut /= float64(len(pl.samples))
	full := e.StepDuration(0, chunk).Seconds()
	rp := k.PrefillDegrade * float64(chunk) / full / meanIn
	rd := k.DecodeDegrade * float64(m.Slots) / e.StepDuration(m.Slots, 0).Seconds() / meanOut
	idle := math.Ceil(meanIn/float64(chunk))*e.BaseMs/1000 + meanIn*e.PerPrefillTokenMs/1000
	ttft := k.TTFTFactor * idle
	if k.LinkGBs > 0 {
		ttft += meanIn * p.KVBytesPerToken() / (k.LinkGBs * 1e9)
	}
	lambda, capU := pl.w.Lambda, pl.o.UtilCap
	d := &Disagg{Profile: p.Name, Constants: k, PrefillRPS: rp, DecodeRPS: rd, TTFT: Sec(ttft),
		TTFTMeet: ttft <= pl.o.SLO.Seconds(),
		Prefill:  int(math.Ceil(lambda / (capU * rp))), Decode: int(math.Ceil(lambda / (capU * rd)))}
	d.Cost = float64(d.Prefill+d.Decode) * p.Cost()
	for pp := max(1, d.Prefill-1); pp <= d.Prefill+1; pp++ {
		for dd := max(1, d.Decode-1); dd <= d.Decode+1; dd++ {
			d.Grid = append(d.Grid, DisaggPoint{Prefill: pp, Decode: dd, ThroughputRPS: math.Min(float64(pp)*rp, float64(dd)*rd),
				Cost: float64(pp+dd) * p.Cost(), Feasible: lambda <= capU*float64(pp)*rp && lambda <= capU*float64(dd)*rd})
		}
	}
	d.Aggregated = pl.Size(Fleet{Pools: []PoolSpec{{Name: "all", Profile: p, MaxTokens: long}}}, lambda)
	return d, nil
}

// SLO is the planner's P99 TTFT target.
func (pl *Planner) SLO() time.Duration { return pl.o.SLO }
