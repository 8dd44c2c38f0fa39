package engined

import (
	"math"
	"testing"
	"time"
)

// The thermal fault's two shapes: a linear slowdown, and with MinClock the
// simulator's (heat first, the clock from half way through the ramp).
func TestThermalShape(t *testing.T) {
	s := time.Second
	cases := []struct {
		name       string
		f          Faults
		at         time.Duration
		slow, heat float64
	}{
		{"none", Faults{}, 5 * s, 1, 0},
		{"linear half way", Faults{Slowdown: 3, HeatC: 20, Ramp: 10 * s}, 5 * s, 2, 10},
		{"linear after the ramp", Faults{Slowdown: 3, HeatC: 20, Ramp: 10 * s}, 30 * s, 3, 20},
		{"sim shape before half way", Faults{MinClock: 0.4, HeatC: 25, Ramp: 20 * s}, 8 * s, 1, 10},
		{"sim shape at three quarters", Faults{MinClock: 0.4, HeatC: 25, Ramp: 20 * s}, 15 * s, 1 / 0.7, 18.75},
		{"sim shape at the end", Faults{MinClock: 0.4, HeatC: 25, Ramp: 20 * s}, 40 * s, 1 / 0.4, 25},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.f.Validate(); err != nil {
				t.Fatal(err)
			}
			fs := faultState{Faults: c.f, since: 0}
			slow, heat := fs.thermal(c.at)
			if math.Abs(slow-c.slow) > 1e-9 || math.Abs(heat-c.heat) > 1e-9 {
				t.Errorf("thermal at %v = %v, %v; want %v, %v", c.at, slow, heat, c.slow, c.heat)
			}
		})
	}
	if err := (Faults{MinClock: 1.5}).Validate(); err == nil {
		t.Error("min_clock 1.5 was accepted")
	}
}
