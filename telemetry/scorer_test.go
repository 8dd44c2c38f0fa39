package telemetry

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// ratio is mostly in [0,1], sometimes outside it or NaN.
func ratio(rng *rand.Rand) float64 {
	switch rng.IntN(20) {
	case 0:
		return math.NaN()
	case 1:
		return -rng.Float64()
	case 2:
		return 1 + 3*rng.Float64()
	case 3:
		return 0
	}
	return rng.Float64()
}

func randomSignals(rng *rand.Rand) *Signals {
	if rng.IntN(6) == 0 {
		return nil
	}
	return &Signals{
		QueueDepth: rng.IntN(50), Running: rng.IntN(30) - 2, TTFTP95: time.Duration(rng.Int64N(int64(8 * time.Second))),
		ErrorRate: ratio(rng) / 5, KVFill: ratio(rng), Hardware: rng.IntN(4) > 0,
		GPUUtil: ratio(rng), MemUtil: ratio(rng), SMOccupancy: ratio(rng), DRAMActive: ratio(rng),
		TempC: 50 + 45*ratio(rng), SMClockMHz: 2000 * ratio(rng), MaxSMClockMHz: []float64{0, 1980, 2000}[rng.IntN(3)],
	}
}

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// TestScorerMatchesFunctions pins Scorer to Normalise and Score, bit for
// bit, on random seeded inputs and random availability.
func TestScorerMatchesFunctions(t *testing.T) {
	other := Weights{0.3, 0, 0.7, 0.01, 2, 0.5, 0, 0.05, 1, 0.25, 0.6}
	otherNorm := Norm{TTFTFull: 3 * time.Second, ErrorFull: 0.25, RTTFull: 100 * ms, JitterFull: 7 * ms, TempOK: 70, TempMax: 91, ClockDropFull: 0.45}
	tests := []struct {
		name string
		w    Weights
		n    Norm
	}{
		{"defaults", DefaultWeights(), DefaultNorm()},
		{"other weights and levels", other, otherNorm},
		{"no load weight", Weights{SigErrors: 1, SigThermal: 0.5}, DefaultNorm()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := NewScorer(tt.w, tt.n)
			rng := rand.New(rand.NewPCG(7, 11))
			for i := range 20_000 {
				sig := randomSignals(rng)
				load := Load{Capacity: []int{0, 1, 25, 100}[rng.IntN(4)], Waiting: rng.IntN(80) - 5}
				var path Path
				if rng.IntN(3) > 0 {
					path = Path{Known: true, RTT: time.Duration(rng.Int64N(int64(400 * ms))), Jitter: time.Duration(rng.Int64N(int64(40 * ms)))}
				}
				wantP, wantAvail := Normalise(sig, load, path, tt.n)
				// Start from garbage: Normalise must overwrite everything.
				p := Pressures{math.NaN(), 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
				avail := [NumSignals]bool{true, true, true, true, true, true, true, true, true, true, true}
				sc.Normalise(&p, &avail, sig, load, &path)
				for s := range NumSignals {
					if !sameBits(p[s], wantP[s]) || avail[s] != wantAvail[s] {
						t.Fatalf("input %d, %s: Scorer gives %v (avail %v), Normalise %v (avail %v)", i, s, p[s], avail[s], wantP[s], wantAvail[s])
					}
				}
				// Any availability and raw pressures, as a caller may give.
				for s := range NumSignals {
					if rng.IntN(4) == 0 {
						avail[s] = !avail[s]
						p[s] = 1.5 * ratio(rng)
					}
				}
				score, health, fallback := sc.Score(&p, &avail)
				wantScore, wantFallback := Score(p, avail, tt.w)
				healthAvail := avail
				for s := range NumSignals {
					healthAvail[s] = healthAvail[s] && !s.Load()
				}
				wantHealth, _ := Score(p, healthAvail, tt.w)
				if !sameBits(score, wantScore) || !sameBits(health, wantHealth) || fallback != wantFallback {
					t.Fatalf("input %d: Scorer gives score %v health %v fallback %v, Score %v, %v and %v",
						i, score, health, fallback, wantScore, wantHealth, wantFallback)
				}
			}
		})
	}
}

// TestRoundNonNegative pins the projector's rounding to math.Round, at the
// halves and the floats next to them included.
func TestRoundNonNegative(t *testing.T) {
	xs := []float64{0, 0.5, 1.5, 2.5, 99.5, 0.49999999999999994, 1 << 52, 1<<52 + 1, 1<<53 + 2, 1e17}
	rng := rand.New(rand.NewPCG(3, 5))
	for range 100_000 {
		xs = append(xs, 100*rng.Float64(), float64(rng.IntN(200))/2)
	}
	for _, x := range xs {
		for _, y := range []float64{math.Nextafter(x, 0), x, math.Nextafter(x, math.Inf(1))} {
			if got, want := roundNonNegative(y), int(math.Round(y)); got != want {
				t.Fatalf("roundNonNegative(%v) = %d, want %d", y, got, want)
			}
		}
	}
	// Every score a projector may see, through Target.
	pr := Projector{Max: 100, Min: 1}
	for range 100_000 {
		score := rng.Float64()
		if got, want := pr.Target(score), min(max(int(math.Round(100*(1-score))), 1), 100); got != want {
			t.Fatalf("Target(%v) = %d, want %d", score, got, want)
		}
	}
}
