package sim

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// TestPCIeStressMovesSignals: a PCIe-stress fault raises the stressed
// backend's PCIe throughput, past the serving traffic of every backend, and
// its TTFT p95 (each step costs more), from its onset on; it moves
// neither the clock nor any other backend's PCIe throughput, and nothing
// before the onset.
func TestPCIeStressMovesSignals(t *testing.T) {
	at, ramp := 25*time.Second, 5*time.Second
	fault := Fault{Kind: FaultPCIe, Backends: []int{0}, At: at, Ramp: ramp, Share: 0.8, Slowdown: 3}
	clean, stressed := withTelemetry("round-robin"), withTelemetry("round-robin", fault)
	clean.RecordSignals, stressed.RecordSignals = true, true
	cr, sr := run(t, clean), run(t, stressed)
	if len(sr.Signals) == 0 || len(sr.Signals) != len(cr.Signals) {
		t.Fatalf("recorded %d and %d reports, want the same number > 0", len(cr.Signals), len(sr.Signals))
	}
	serving := 2 * telemetry.MockPCIeServeBps // sent and received, busy all the time
	full := 2 * 0.8 * telemetry.MockPCIeLinkBps
	var cleanTTFT, stressedTTFT time.Duration
	for i := range sr.Signals {
		c, s := &cr.Signals[i], &sr.Signals[i]
		if c.Backend != s.Backend || c.Signals.At != s.Signals.At {
			t.Fatalf("report %d: backend %d at %v against %d at %v", i, c.Backend, c.Signals.At, s.Backend, s.Signals.At)
		}
		sig := &s.Signals
		switch {
		case sig.At < at:
			if *sig != c.Signals {
				t.Fatalf("report of backend %d at %v differs before the onset: %+v against %+v", s.Backend, sig.At, *sig, c.Signals)
			}
		case s.Backend != 0:
			if sig.PCIeBps > serving {
				t.Errorf("backend %d at %v: PCIe %.3g B/s, want at most the serving %.3g", s.Backend, sig.At, sig.PCIeBps, serving)
			}
		case sig.At >= at+ramp:
			if sig.PCIeBps < full || sig.PCIeBps > full+serving {
				t.Errorf("stressed backend at %v: PCIe %.3g B/s, want %.3g plus serving", sig.At, sig.PCIeBps, full)
			}
			if sig.SMClockMHz != sig.MaxSMClockMHz {
				t.Errorf("stressed backend at %v: clock %v of %v, want nominal", sig.At, sig.SMClockMHz, sig.MaxSMClockMHz)
			}
			stressedTTFT += sig.TTFTP95
			cleanTTFT += c.Signals.TTFTP95
		}
	}
	if stressedTTFT < cleanTTFT*3/2 {
		t.Errorf("stressed backend's summed TTFT p95 after the ramp %v, want well above the clean run's %v", stressedTTFT, cleanTTFT)
	}
}

func TestPCIeStressIsDeterministic(t *testing.T) {
	cfg := withTelemetry("pressure", Fault{Kind: FaultPCIe, Backends: []int{1}, At: 22 * time.Second, Ramp: 10 * time.Second, Share: 0.5, Slowdown: 2},
		Fault{Kind: FaultThermal, Backends: []int{1}, At: 30 * time.Second, PeakC: 20, Ramp: 10 * time.Second, MinClock: 0.5})
	cfg.KeepRecords, cfg.RecordSignals = true, true
	a, _ := json.Marshal(run(t, cfg))
	b, _ := json.Marshal(run(t, cfg))
	if !bytes.Equal(a, b) {
		t.Fatal("same PCIe fault and seed gave different results")
	}
}

func TestBadPCIeFaultsRejected(t *testing.T) {
	for _, f := range []Fault{
		{Kind: FaultPCIe, Backends: []int{0}, Share: 0.5, Slowdown: 2},
		{Kind: FaultPCIe, Backends: []int{0}, Ramp: time.Second, Share: 0, Slowdown: 2},
		{Kind: FaultPCIe, Backends: []int{0}, Ramp: time.Second, Share: 1.5, Slowdown: 2},
		{Kind: FaultPCIe, Backends: []int{0}, Ramp: time.Second, Share: 0.5, Slowdown: 0.5},
		{Kind: FaultPCIe, Ramp: time.Second, Share: 0.5, Slowdown: 2},
	} {
		cfg := withTelemetry("pressure", f)
		if err := cfg.Validate(nil); err == nil {
			t.Errorf("fault %+v accepted", f)
		}
	}
}
