package xds

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestBuildTimeGauge: a push records how long building and setting its
// snapshots took, in stargate_xds_build_seconds; before any push it is 0.
func TestBuildTimeGauge(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := NewServer(Options{Window: -1, Logger: quiet, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(s.m.build); got != 0 {
		t.Fatalf("build time %v before any push, want 0", got)
	}
	s.Update(eps3(1, 2, 3))
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(s.m.pushes) < 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no push within 10 s")
		}
	}
	if got := testutil.ToFloat64(s.m.build); got <= 0 {
		t.Errorf("build time %v after a push, want > 0", got)
	}
	if n, err := testutil.GatherAndCount(reg, "stargate_xds_build_seconds"); err != nil || n != 1 {
		t.Errorf("stargate_xds_build_seconds not registered: %d %v", n, err)
	}
}
