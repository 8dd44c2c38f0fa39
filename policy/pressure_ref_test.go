package policy

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// refreshReference is the pressure update written plainly with
// telemetry.Normalise and telemetry.Score.
// Pressure.refresh must give the same state, bit for bit.
func refreshReference(pp PressureParams, state []BackendWeight, views []View) []BackendWeight {
	for len(state) < len(views) {
		state = append(state, BackendWeight{})
	}
	state = state[:len(views)]
	for i := range views {
		v := &views[i]
		// The backlog: waiting at the backend and here, or everything
		// outstanding and queued here beyond the capacity.
		backlog := max(v.Waiting+v.Queued, v.Active+v.Pending+v.Waiting+v.Queued-v.Capacity)
		p, avail := telemetry.Normalise(v.Signals, telemetry.Load{Capacity: v.Capacity, Waiting: backlog, Overload: v.Overload,
			Busy: float64(v.Active+v.Pending+v.Waiting+v.Queued) / float64(max(v.Capacity, 1))}, v.Path, pp.Norm)
		if e := v.ErrorRate / pp.Norm.ErrorFull; e > p[telemetry.SigErrors] || !avail[telemetry.SigErrors] {
			p[telemetry.SigErrors] = min(max(e, p[telemetry.SigErrors]), 1)
			avail[telemetry.SigErrors] = true
		}
		score, fallback := telemetry.Score(p, avail, pp.Weights)
		if avail[telemetry.SigErrors] && p[telemetry.SigErrors] >= 1 {
			score = 1
		}
		st := &state[i]
		st.Rank = pp.Projector.Project(st.Rank, score)
		st.Weight = max(v.Capacity, 1) * st.Rank
		st.Score, st.Fallback, st.Pressures = score, fallback, p
	}
	return state
}

// randomRatio is mostly in [0,1], sometimes outside it or NaN.
func randomRatio(rng *rand.Rand) float64 {
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

// randomView changes the signals of v at random: reports missing or without
// hardware, unknown paths, zero capacity, values out of range and NaN.
func randomView(rng *rand.Rand, v *View) {
	v.Capacity = []int{0, 1, 25, 100}[rng.IntN(4)]
	v.Waiting, v.Queued = rng.IntN(80)-5, rng.IntN(20)
	v.Active, v.Pending = rng.IntN(110), rng.IntN(20)
	v.ErrorRate = randomRatio(rng) / 4
	v.Overload = randomRatio(rng) / 2
	v.Path = telemetry.Path{}
	if rng.IntN(3) > 0 {
		v.Path = telemetry.Path{Known: true, RTT: time.Duration(rng.Int64N(int64(400 * time.Millisecond))),
			Jitter: time.Duration(rng.Int64N(int64(40 * time.Millisecond)))}
	}
	v.Signals = nil
	if rng.IntN(6) == 0 {
		return
	}
	v.Signals = &telemetry.Signals{
		QueueDepth: rng.IntN(50), Running: rng.IntN(30) - 2, TTFTP95: time.Duration(rng.Int64N(int64(8 * time.Second))),
		ErrorRate: randomRatio(rng) / 5, KVFill: randomRatio(rng), Hardware: rng.IntN(4) > 0,
		GPUUtil: randomRatio(rng), MemUtil: randomRatio(rng), SMOccupancy: randomRatio(rng), DRAMActive: randomRatio(rng),
		TempC: 50 + 45*randomRatio(rng), SMClockMHz: 2000 * randomRatio(rng), MaxSMClockMHz: []float64{0, 1980, 2000}[rng.IntN(3)],
	}
}

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func TestPressureRefreshMatchesReference(t *testing.T) {
	weights := []struct {
		name string
		pp   func() PressureParams
	}{
		{"defaults", DefaultPressureParams},
		{"other weights and levels", func() PressureParams {
			pp := DefaultPressureParams()
			for s := range pp.Weights {
				pp.Weights[s] = float64(s%4) * 0.3
			}
			pp.Norm.ErrorFull, pp.Norm.TempOK, pp.Norm.TempMax, pp.Norm.BusyKnee = 0.3, 70, 95, 0.4
			pp.Projector = telemetry.Projector{Max: 50, Min: 2, Hysteresis: 3}
			return pp
		}},
	}
	for _, tt := range weights {
		for _, seed := range []uint64{1, 2, 3} {
			rng := rand.New(rand.NewPCG(seed, 42))
			pr, err := NewPressure(DefaultParams(), tt.pp(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var ref []BackendWeight
			vs := make([]View, 200)
			for i := range vs {
				vs[i] = View{Index: i, Key: uint64(i), Eligible: true}
				randomView(rng, &vs[i])
			}
			for round := range 30 {
				// Change some backends a lot and the rest a little, so that
				// hysteresis both holds and releases weights.
				for i := range vs {
					switch {
					case rng.IntN(5) == 0:
						randomView(rng, &vs[i])
					case vs[i].Signals != nil:
						vs[i].Signals.KVFill += 0.05 * (rng.Float64() - 0.5)
						vs[i].Waiting += rng.IntN(3) - 1
					}
				}
				n := len(vs) - rng.IntN(3) // the fleet shrinks and grows back
				got := pr.Weights(vs[:n], nil)
				ref = refreshReference(pr.pp, ref, vs[:n])
				for i := range got {
					g, r := got[i], ref[i]
					same := g.Weight == r.Weight && g.Rank == r.Rank && g.Fallback == r.Fallback && sameBits(g.Score, r.Score)
					for s := range g.Pressures {
						same = same && sameBits(g.Pressures[s], r.Pressures[s])
					}
					if !same {
						t.Fatalf("%s seed %d round %d backend %d:\n got %+v\nwant %+v", tt.name, seed, round, i, g, r)
					}
				}
			}
		}
	}
}
