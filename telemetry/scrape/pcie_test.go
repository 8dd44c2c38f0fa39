package scrape

import (
	"bytes"
	"math"
	"testing"

	"github.com/stargate-llm/stargate/telemetry"
)

// TestPCIeRoundTrip: the mock exporter writes the PCIe throughput fields,
// which grow with a stressor's share of the link; the parser reads them back
// and Hardware averages them over the GPUs that export them.
func TestPCIeRoundTrip(t *testing.T) {
	gpus := []telemetry.GPUValues{
		telemetry.MockDCGM(0, telemetry.GPUState{Busy: 1, PCIeStress: 0.5}),
		telemetry.MockDCGM(1, telemetry.GPUState{Busy: 0.5}),
	}
	want0 := telemetry.MockPCIeServeBps + 0.5*telemetry.MockPCIeLinkBps
	want1 := 0.5 * telemetry.MockPCIeServeBps
	if gpus[0].PCIeTxBps != want0 || gpus[0].PCIeRxBps != want0 || gpus[1].PCIeTxBps != want1 {
		t.Fatalf("mock PCIe %v/%v and %v, want %v and %v", gpus[0].PCIeTxBps, gpus[0].PCIeRxBps, gpus[1].PCIeTxBps, want0, want1)
	}
	var buf bytes.Buffer
	if err := telemetry.WriteDCGM(&buf, "h", gpus); err != nil {
		t.Fatal(err)
	}
	back, err := ParseDCGM(&buf)
	if err != nil {
		t.Fatal(err)
	}
	var sig telemetry.Signals
	telemetry.Hardware(&sig, back)
	if want := (2*want0 + 2*want1) / 2; math.Abs(sig.PCIeBps-want) > 1 {
		t.Errorf("PCIe throughput %v, want the mean of sent plus received %v", sig.PCIeBps, want)
	}
	// A GPU that does not export the fields does not count.
	back[1].Has.PCIe = false
	telemetry.Hardware(&sig, back)
	if math.Abs(sig.PCIeBps-2*want0) > 1 {
		t.Errorf("PCIe throughput %v with one GPU exporting it, want %v", sig.PCIeBps, 2*want0)
	}
}
