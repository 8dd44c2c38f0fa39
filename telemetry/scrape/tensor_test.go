package scrape

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/telemetry"
)

// TestTensorActiveRoundTrip: the mock exporter writes the tensor-core
// activity field, the parser reads it back, and Hardware averages it over
// the GPUs that export it (a GPU without it does not count as idle).
func TestTensorActiveRoundTrip(t *testing.T) {
	gpus := []telemetry.GPUValues{
		telemetry.MockDCGM(0, telemetry.GPUState{Busy: 1, Batch: 10, MaxSeqs: 10}),
		telemetry.MockDCGM(1, telemetry.GPUState{Busy: 0.5, Batch: 0, MaxSeqs: 10}),
	}
	var buf bytes.Buffer
	if err := telemetry.WriteDCGM(&buf, "host", gpus); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\"") {
		t.Fatalf("the exposition lacks the tensor-core field:\n%s", buf.String())
	}
	got, err := ParseDCGM(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		if !g.Has.Tensor || math.Abs(g.TensorActive-gpus[i].TensorActive) > 1e-9 {
			t.Errorf("GPU %d: tensor %v (has %v), want %v", i, g.TensorActive, g.Has.Tensor, gpus[i].TensorActive)
		}
	}
	if gpus[0].TensorActive != 0.75 || gpus[1].TensorActive != 0.125 {
		t.Errorf("mock tensor activity %v and %v, want 0.75 (busy, full batch) and 0.125 (half busy, empty)", gpus[0].TensorActive, gpus[1].TensorActive)
	}
	got[1].Has.Tensor, got[1].TensorActive = false, 0 // a GPU that does not export it
	var sig telemetry.Signals
	telemetry.Hardware(&sig, got)
	if sig.TensorActive != 0.75 {
		t.Errorf("signals' tensor activity %v, want 0.75 (the one GPU that exports it)", sig.TensorActive)
	}
}
