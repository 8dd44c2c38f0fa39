package study

import (
	"context"
	"fmt"
	"math"
)

// Probe is one step of a sustainable-rate search: the rate tried, whether
// the system sustained it, and whatever figures the caller keeps for it.
type Probe[T any] struct {
	Rate    float64 `json:"rate"`
	Sustain bool    `json:"sustain"`
	Figures T       `json:"figures"`
}

// SustainableRate finds, by bisection, the highest rate in [lo, hi] that
// try says the system sustains, assuming that sustaining is monotone (a
// system that sustains a rate sustains every lower one). It runs exactly
// steps probes after checking lo (not sustained: the answer is 0) and hi
// (sustained: the answer is hi), and returns every probe in order, so each
// step's raw figures are kept. The answer lies within (hi-lo)/2^steps of the
// true knee.
func SustainableRate[T any](ctx context.Context, lo, hi float64, steps int,
	try func(ctx context.Context, rate float64) (bool, T, error)) (float64, []Probe[T], error) {
	if !(lo > 0) || !(hi > lo) || math.IsInf(hi, 0) {
		return 0, nil, fmt.Errorf("study: want 0 < lo < hi, got lo %v hi %v", lo, hi)
	}
	if steps < 1 || steps > 60 {
		return 0, nil, fmt.Errorf("study: steps must be 1-60, got %d", steps)
	}
	var probes []Probe[T]
	probe := func(rate float64) (bool, error) {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		ok, figures, err := try(ctx, rate)
		if err != nil {
			return false, fmt.Errorf("study: probe at %.4g req/s: %w", rate, err)
		}
		probes = append(probes, Probe[T]{Rate: rate, Sustain: ok, Figures: figures})
		return ok, nil
	}
	ok, err := probe(lo)
	if err != nil || !ok {
		return 0, probes, err
	}
	if ok, err = probe(hi); err != nil || ok {
		return hi, probes, err
	}
	good, bad := lo, hi
	for range steps {
		mid := (good + bad) / 2
		ok, err := probe(mid)
		if err != nil {
			return good, probes, err
		}
		if ok {
			good = mid
		} else {
			bad = mid
		}
	}
	return good, probes, nil
}
