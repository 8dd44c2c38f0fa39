package telemetry

import (
	"math"
	"strings"
	"testing"
)

// TestSecurityWeightsWhoseSumOverflows: every weight finite but their sum
// not (two of 1e308), or a missing load signal's weight handed to a tiny
// one (a scale of +Inf times a pressure of 0), made scores NaN, which the
// router's admin API could not encode (200 with an empty body). Validate
// must refuse such weights, and any weights it accepts must score finitely,
// whatever the pressures.
func TestSecurityWeightsWhoseSumOverflows(t *testing.T) {
	tests := []struct {
		name string
		set  map[Signal]float64
		ok   bool
	}{
		{"defaults", nil, true},
		{"largest and smallest", map[Signal]float64{SigGPU: MaxWeight, SigQueue: MinWeight, SigTTFT: 0, SigKV: 0, SigMem: 0, SigSM: 0, SigDRAM: 0}, true},
		{"one huge weight", map[Signal]float64{SigQueue: 1e308}, false},
		{"a missing signal's weight handed to a tiny one", map[Signal]float64{SigGPU: 1e300, SigQueue: 1e-300, SigTTFT: 0, SigKV: 0, SigMem: 0, SigSM: 0, SigDRAM: 0}, false},
		{"two huge load weights", map[Signal]float64{SigQueue: 1e308, SigGPU: 1e308}, false},
		{"huge load and non-load", map[Signal]float64{SigQueue: 1e308, SigThermal: 1e308}, false},
		{"all max float", map[Signal]float64{SigQueue: math.MaxFloat64, SigTTFT: math.MaxFloat64}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := DefaultWeights()
			for s, v := range tt.set {
				w[s] = v
			}
			err := w.Validate()
			if (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "must be 0 or between") {
					t.Errorf("error %q does not say what a weight may be", err)
				}
				return
			}
			for _, level := range []float64{0, 0.5, 1} {
				var p Pressures
				var avail [NumSignals]bool
				for s := range NumSignals {
					p[s], avail[s] = level, s != SigGPU // one load signal missing: its weight is handed on
				}
				if got, _ := Score(p, avail, w); math.IsNaN(got) || math.IsInf(got, 0) {
					t.Errorf("Score = %v at pressure %v with weights Validate accepted", got, level)
				}
			}
		})
	}
}

// TestSecurityProjectorMaxBounded: a projection max of 2^63-1 was accepted,
// and the pressure policy's weight, capacity times that level, overflowed
// int64 (25 x 9.19e18 read as 8.39e18: any ordering of backends, or a
// negative weight). Validate must refuse a max beyond MaxLevel.
func TestSecurityProjectorMaxBounded(t *testing.T) {
	for _, tt := range []struct {
		max int
		ok  bool
	}{{100, true}, {1_000_000, true}, {1_000_001, false}, {math.MaxInt64, false}} {
		err := Projector{Max: tt.max, Min: 1, Hysteresis: 0}.Validate()
		if (err == nil) != tt.ok {
			t.Errorf("max %d: Validate() = %v, want ok %v", tt.max, err, tt.ok)
		}
	}
}
