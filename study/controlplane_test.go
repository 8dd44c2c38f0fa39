package study

import (
	"strings"
	"testing"
)

// TestMeasureControlPlane: both halves of a routing update take some time
// at the study's nine backends, and the line sets them beside the Solyx AI
// Grid paper's figure.
func TestMeasureControlPlane(t *testing.T) {
	n := StudyBackends(nil)
	if n != 9 {
		t.Fatalf("the study has %d backends, want 9", n)
	}
	cp, err := MeasureControlPlane(n, 10)
	if err != nil {
		t.Fatal(err)
	}
	if cp.Backends != 9 || cp.Projection <= 0 || cp.XDSBuild <= 0 {
		t.Fatalf("control plane %+v: want 9 backends and both times > 0", cp)
	}
	if line := ControlPlaneLine(cp); !strings.Contains(line, "projection cycle") || !strings.Contains(line, "0.2 ms") {
		t.Errorf("line %q", line)
	}
}
