package study

import (
	"context"
	"errors"
	"math"
	"testing"
)

// errStop is what a failing probe returns.
var errStop = errors.New("stop")

// TestSustainableRateFindsKnownKnee: on an M/M/1 queue the p95 time in
// system is ln(20)/(mu - lambda), so with mu = 100/s and a 0.1 s SLO the
// knee is lambda = 100 - 10 ln 20 = 70.04 req/s.
func TestSustainableRateFindsKnownKnee(t *testing.T) {
	const mu, slo = 100.0, 0.1
	knee := mu - math.Log(20)/slo
	try := func(_ context.Context, rate float64) (bool, float64, error) {
		p95 := math.Inf(1)
		if rate < mu {
			p95 = math.Log(20) / (mu - rate)
		}
		return p95 <= slo, p95, nil
	}
	for _, steps := range []int{8, 10, 12} {
		got, probes, err := SustainableRate(context.Background(), 1, 200, steps, try)
		if err != nil {
			t.Fatal(err)
		}
		tol := 199 / math.Pow(2, float64(steps))
		if got > knee || knee-got > tol {
			t.Errorf("%d steps: %.4f req/s, want at most %.4f and within %.3f of it", steps, got, knee, tol)
		}
		if len(probes) != steps+2 {
			t.Errorf("%d steps: %d probes kept, want %d", steps, len(probes), steps+2)
		}
		for _, p := range probes {
			if p.Sustain != (p.Rate <= knee) || (p.Sustain && p.Figures > slo) {
				t.Errorf("probe %+v disagrees with the system", p)
			}
		}
	}
}

func TestSustainableRateEdges(t *testing.T) {
	ctx := context.Background()
	never := func(context.Context, float64) (bool, int, error) { return false, 0, nil }
	always := func(context.Context, float64) (bool, int, error) { return true, 0, nil }
	if got, p, _ := SustainableRate(ctx, 1, 10, 8, never); got != 0 || len(p) != 1 {
		t.Errorf("never sustained: %v after %d probes, want 0 after 1", got, len(p))
	}
	if got, p, _ := SustainableRate(ctx, 1, 10, 8, always); got != 10 || len(p) != 2 {
		t.Errorf("always sustained: %v after %d probes, want 10 after 2", got, len(p))
	}
	failing := func(_ context.Context, r float64) (bool, int, error) {
		if r > 5 {
			return false, 0, errStop
		}
		return true, 0, nil
	}
	if _, _, err := SustainableRate(ctx, 1, 10, 8, failing); !errors.Is(err, errStop) {
		t.Errorf("a failing probe: err = %v", err)
	}
	for _, bad := range [][2]float64{{0, 10}, {5, 5}, {1, math.Inf(1)}} {
		if _, _, err := SustainableRate(ctx, bad[0], bad[1], 8, always); err == nil {
			t.Errorf("bounds %v accepted", bad)
		}
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, _, err := SustainableRate(cancelled, 1, 10, 8, always); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled search: %v", err)
	}
}
