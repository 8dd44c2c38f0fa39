package policy

import (
	"math"
	"testing"

	"github.com/stargate-llm/stargate/telemetry"
)

func pressureViews(n int) []View {
	vs := views(backends(n), 100)
	for i := range vs {
		vs[i].Signals = &telemetry.Signals{Hardware: true, TempC: 60, SMClockMHz: 1980, MaxSMClockMHz: 1980, KVFill: 0.3, GPUUtil: 0.5}
	}
	return vs
}

// shares places 20,000 sessions, from first on, and counts where they go.
func shares(p Policy, vs []View, first uint64) []int {
	n := make([]int, len(vs))
	for s := first; s < first+20_000; s++ {
		d := p.Pick(0, &Request{Session: s, QueuedAt: -1}, vs)
		if d.Kind == Dispatch {
			n[d.Backend]++
		}
	}
	return n
}

// untunedPressure is pressure with every signal weighted
// (UntunedPressureParams), to test each signal's effect.
func untunedPressure(t *testing.T, n int) *Pressure {
	t.Helper()
	p, err := NewPressure(DefaultParams(), UntunedPressureParams(), backends(n))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestPressureDeweightsFailingAndHotBackends(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(v *View)
		most   float64 // the affected backend's share at most, as a fraction of a fair share
	}{
		{"error rate seen by the router", func(v *View) { v.ErrorRate = 0.5 }, 0.05},
		{"error rate in the report", func(v *View) { v.Signals.ErrorRate = 0.2 }, 0.05},
		{"overheating", func(v *View) { v.Signals.TempC = 90 }, 0.5},
		{"throttled clock", func(v *View) { v.Signals.SMClockMHz = 1300 }, 0.5},
		{"jittery path", func(v *View) { v.Path = telemetry.Path{Known: true, RTT: 40 * ms, Jitter: 25 * ms} }, 0.8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vs := pressureViews(4)
			p := untunedPressure(t, 4)
			base := shares(p, vs, 1)
			tt.mutate(&vs[2])
			after := shares(p, vs, 1_000_000) // new sessions: the ones placed before stay (StickyParams)
			fair := 20_000 / 4.0
			if float64(after[2]) > tt.most*fair || after[2] >= base[2] {
				t.Errorf("backend 2 kept %d of 20000 sessions (was %d; want at most %.0f)", after[2], base[2], tt.most*fair)
			}
		})
	}
}

func TestPressureHysteresisAndAffinity(t *testing.T) {
	vs := pressureViews(5)
	p := newPolicy(t, "pressure", backends(5)).(*Pressure)
	first := make([]int, 2000)
	for s := range first {
		first[s] = p.Pick(0, &Request{Session: uint64(s), QueuedAt: -1}, vs).Backend
	}
	w0 := p.Weights(vs, nil)
	// Small noise in the load keeps every weight and every session's backend.
	vs[1].Signals.KVFill, vs[3].Signals.GPUUtil = 0.35, 0.58
	moved := 0
	for s := range first {
		if p.Pick(0, &Request{Session: uint64(s), QueuedAt: -1}, vs).Backend != first[s] {
			moved++
		}
	}
	w1 := p.Weights(vs, nil)
	for i := range w0 {
		if w0[i].Weight != w1[i].Weight {
			t.Errorf("backend %d: weight %d -> %d on noise", i, w0[i].Weight, w1[i].Weight)
		}
	}
	if moved != 0 {
		t.Errorf("%d sessions moved on noise", moved)
	}
	// A real change moves only sessions away from (or towards) the changed backend.
	vs[1].Signals.ErrorRate = 1
	for s := range first {
		if b := p.Pick(0, &Request{Session: uint64(s), QueuedAt: -1}, vs).Backend; b != first[s] && first[s] != 1 {
			t.Fatalf("session %d moved from %d to %d though only backend 1 changed", s, first[s], b)
		}
	}
}

func TestPressureFallbackFlag(t *testing.T) {
	vs := pressureViews(3)
	vs[1].Signals.Hardware = false
	vs[2].Signals = nil
	p := newPolicy(t, "pressure", backends(3)).(*Pressure)
	ws := p.Weights(vs, nil)
	if ws[0].Fallback || !ws[1].Fallback || !ws[2].Fallback {
		t.Errorf("fallback flags %v %v %v, want false true true", ws[0].Fallback, ws[1].Fallback, ws[2].Fallback)
	}
	for i, w := range ws {
		if w.Rank < 1 || w.Rank > 100 || w.Weight != vs[i].Capacity*w.Rank {
			t.Errorf("backend %d: level %d (want 1-100), weight %d (want capacity %d times the level)", i, w.Rank, w.Weight, vs[i].Capacity)
		}
	}
	if !p.CapabilityAware() {
		t.Error("pressure does not ask for the capability filter")
	}
	if _, err := NewPressure(DefaultParams(), PressureParams{}, nil); err == nil {
		t.Error("zero pressure params accepted")
	}
}

// TestPressurePlacesByItsWeights: the weights pressure reports (and a live
// router exports to Envoy) are the weights it places by: with every backend
// free, each session goes to the backend ranking it first by weighted
// rendezvous over the reported weights.
func TestPressurePlacesByItsWeights(t *testing.T) {
	vs := pressureViews(6)
	vs[1].Capacity, vs[4].Capacity = 40, 250
	vs[2].Signals.TempC = 84
	vs[3].ErrorRate = 0.03
	vs[5].Path = telemetry.Path{Known: true, RTT: 80 * ms, Jitter: 10 * ms}
	p := newPolicy(t, "pressure", backends(6)).(*Pressure)
	ws := p.Weights(vs, nil)
	for s := uint64(1); s <= 5000; s++ {
		best, bestScore := -1, 0.0
		for i := range vs {
			if sc := -float64(ws[i].Weight) / math.Log(unit(mix(s^vs[i].Key))); best < 0 || sc > bestScore {
				best, bestScore = i, sc
			}
		}
		if d := p.Pick(0, &Request{Session: s, QueuedAt: -1}, vs); d.Kind != Dispatch || d.Backend != best {
			t.Fatalf("session %d: picked %+v, the reported weights %v rank backend %d first", s, d, ws, best)
		}
	}
	for i, w := range p.LastWeights(nil) {
		if w.Weight != ws[i].Weight || w.Weight != PlacementWeight(vs[i].Capacity, w.Rank) {
			t.Errorf("backend %d: last weight %d, reported %d, capacity x level %d", i, w.Weight, ws[i].Weight, PlacementWeight(vs[i].Capacity, w.Rank))
		}
	}
}

// TestPressureReactsToOwnBacklog: the router's own dispatches past a
// backend's free slots, and requests waiting at the router, lower its
// weight at the next pick, before any report shows the queue; with the busy
// share off (knee 1), a backend with free slots keeps its weight however
// busy, and with the default knee its own in-flight count lowers it.
func TestPressureReactsToOwnBacklog(t *testing.T) {
	vs := pressureViews(3)
	for i := range vs {
		vs[i].Capacity, vs[i].Active = 10, 6
	}
	def := newPolicy(t, "pressure", backends(3)).(*Pressure)
	idle := def.Weights(vs, nil)[0].Weight
	vs[0].Pending = 4 // every slot in use, nothing waiting: the busy share alone
	if w := def.Weights(vs, nil)[0].Weight; w >= idle {
		t.Errorf("default knee: weight %d -> %d with every slot in use", idle, w)
	}
	vs[0].Pending = 0
	pp := DefaultPressureParams()
	pp.Norm.BusyKnee = 1
	p, err := NewPressure(DefaultParams(), pp, backends(3))
	if err != nil {
		t.Fatal(err)
	}
	before := p.Weights(vs, nil)
	vs[0].Pending = 3 // busy, still within its slots
	if w := p.Weights(vs, nil); w[0].Weight != before[0].Weight {
		t.Errorf("weight %d -> %d for a backend with free slots", before[0].Weight, w[0].Weight)
	}
	vs[1].Pending = 9 // 5 past its slots: the burst shows at once
	vs[2].Queued = 4  // waiting at this router
	after := p.Weights(vs, nil)
	for _, b := range []int{1, 2} {
		if after[b].Weight >= before[b].Weight {
			t.Errorf("backend %d: weight %d -> %d with a backlog of %d", b, before[b].Weight, after[b].Weight, Backlog(&vs[b]))
		}
	}
	vs[1].Pending, vs[2].Queued = 0, 0 // drained: weights come back
	if back := p.Weights(vs, nil); back[1].Weight != before[1].Weight || back[2].Weight != before[2].Weight {
		t.Errorf("weights %d, %d after the backlog drained, want %d, %d", back[1].Weight, back[2].Weight, before[1].Weight, before[2].Weight)
	}
}

// TestPressureFailingBackendAtMinimum: a backend failing at the errors
// level or more is at the minimum level whatever the errors weight; below
// it, the weight decides.
func TestPressureFailingBackendAtMinimum(t *testing.T) {
	pp := DefaultPressureParams()
	pp.Weights[telemetry.SigErrors] = 0.1
	p, err := NewPressure(DefaultParams(), pp, backends(2))
	if err != nil {
		t.Fatal(err)
	}
	vs := pressureViews(2)
	vs[0].ErrorRate = pp.Norm.ErrorFull
	vs[1].ErrorRate = pp.Norm.ErrorFull / 2
	ws := p.Weights(vs, nil)
	if ws[0].Rank != pp.Projector.Min {
		t.Errorf("failing backend at level %d, want the minimum %d", ws[0].Rank, pp.Projector.Min)
	}
	if ws[1].Rank <= pp.Projector.Min {
		t.Errorf("backend at half the errors level at level %d, want above the minimum with errors weight 0.1", ws[1].Rank)
	}
}
