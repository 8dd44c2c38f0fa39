package routerd

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestProjectionGauge: exporting the weights (Backends, as the xDS push and
// /v1/stargate/backends do) records the projection cycle's duration in
// stargate_router_projection_seconds.
func TestProjectionGauge(t *testing.T) {
	_, r := startRouterWith(t, func(c *Config) { c.Policy = "pressure" }, nil, &echoBackend{}, &echoBackend{})
	if got := testutil.ToFloat64(r.met.proj); got != 0 {
		t.Fatalf("projection time %v before any cycle, want 0", got)
	}
	if n := len(r.Backends()); n != 2 {
		t.Fatalf("%d backends, want 2", n)
	}
	if got := testutil.ToFloat64(r.met.proj); got <= 0 {
		t.Errorf("projection time %v after a cycle, want > 0", got)
	}
	if n, err := testutil.GatherAndCount(r.met.reg, "stargate_router_projection_seconds"); err != nil || n != 1 {
		t.Errorf("stargate_router_projection_seconds not registered: %d %v", n, err)
	}
}
