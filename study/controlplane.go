package study

import (
	"fmt"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
	"github.com/stargate-llm/stargate/xds"
)

// ControlPlane is the control plane's routing-update overhead at a fleet
// size, measured on this machine (wall time): one projection cycle of the
// pressure policy (every backend's signals normalised, scored and projected
// to a weight) and one xDS snapshot build of the weights, each the mean
// over rounds. A live router exports the same two as gauges
// (stargate_router_projection_seconds, stargate_xds_build_seconds).
type ControlPlane struct {
	Backends   int           `json:"backends"`
	Projection time.Duration `json:"projection_ns"`
	XDSBuild   time.Duration `json:"xds_build_ns"`
}

// MeasureControlPlane measures ControlPlane for backends backends with
// varied signals, over rounds rounds.
func MeasureControlPlane(backends, rounds int) (ControlPlane, error) {
	rounds = max(rounds, 1)
	pr, err := policy.NewPressure(policy.DefaultParams(), policy.DefaultPressureParams(), nil)
	if err != nil {
		return ControlPlane{}, fmt.Errorf("study: control plane: %w", err)
	}
	vs := make([]policy.View, backends)
	for i := range vs {
		sig := &telemetry.Signals{QueueDepth: i % 7, Running: 10, TTFTP95: time.Duration(i%5) * 100 * time.Millisecond,
			ErrorRate: float64(i%3) / 100, KVFill: 0.5, Hardware: true, GPUUtil: 0.7, MemUtil: 0.6, SMOccupancy: 0.5,
			DRAMActive: 0.4, TempC: 60, SMClockMHz: 1800, MaxSMClockMHz: 1980}
		vs[i] = policy.View{Index: i, Capacity: 25, Eligible: true, Signals: sig}
	}
	out := make([]policy.BackendWeight, 0, backends)
	start := time.Now()
	for range rounds {
		out = policy.WeightsOf(pr, vs)
	}
	cp := ControlPlane{Backends: backends, Projection: time.Since(start) / time.Duration(rounds)}
	eps := make([]xds.Endpoint, len(out))
	for i, w := range out {
		eps[i] = xds.Endpoint{ID: fmt.Sprintf("backend-%d", i), Region: fmt.Sprintf("site-%d", i%3), Host: "10.0.0.1",
			Port: uint32(8000 + i), Weight: uint32(max(w.Weight, 1)), Health: xds.Healthy}
	}
	if cp.XDSBuild, err = xds.BuildTime(eps, rounds); err != nil {
		return ControlPlane{}, fmt.Errorf("study: control plane: %w", err)
	}
	return cp, nil
}

// ControlPlaneLine reports cp beside the Solyx AI Grid paper's 0.2 ms for
// both parts at nine replicas.
func ControlPlaneLine(cp ControlPlane) string {
	total := cp.Projection + cp.XDSBuild
	return fmt.Sprintf("control plane at %d backends (this machine, wall time): projection cycle %.1f µs + xDS build %.1f µs = %.3f ms a routing update (Solyx AI Grid paper: 0.2 ms at nine replicas)",
		cp.Backends, float64(cp.Projection)/1e3, float64(cp.XDSBuild)/1e3, float64(total)/1e6)
}

// StudyBackends is the number of backends a resilience study runs on: the
// fleet's, or ResilienceFleet's when nil.
func StudyBackends(f *config.Fleet) int {
	if f == nil {
		f = ResilienceFleet()
	}
	_, n := fleetGPUs(f)
	return n
}
