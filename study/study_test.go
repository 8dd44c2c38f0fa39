package study

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
)

func result(fleet, pol string, rps float64, seed uint64, goodput float64) RunResult {
	return RunResult{Fleet: fleet, Policy: pol, RPS: rps, Seed: seed,
		Summary:  metrics.Summary{GoodputRPS: goodput, OfferedRPS: rps, SLOPct: 90, ReusePct: 50, TTFTP99S: 2},
		Backends: []sim.BackendResult{{Name: "b0", Workers: 2}, {Name: "b1", Workers: 8, BackendSummary: metrics.BackendSummary{Completed: 5, TTFTP50S: 0.3}}}}
}

func TestCellsAverageSeeds(t *testing.T) {
	r := &Results{Study: "test", Runs: []RunResult{
		result("hetero", "waw", 450, 1, 100), result("hetero", "waw", 450, 2, 200), result("hetero", "waw", 450, 3, 150),
		result("hetero", "pulsar-waw", 450, 1, 300),
	}}
	cells := r.Cells()
	if len(cells) != 2 {
		t.Fatalf("%d cells, want 2", len(cells))
	}
	c := cells[0]
	if c.Policy != "waw" || c.Seeds != 3 || c.Goodput != 150 || c.GoodputLo != 100 || c.GoodputHi != 200 {
		t.Errorf("waw cell = %+v, want mean 150 over 3 seeds, range 100-200", c)
	}
	f := r.Findings()
	if len(f) != 1 || !strings.Contains(f[0], "pulsar-waw goodput 300.0 vs waw 150.0 req/s (+100.0%)") {
		t.Errorf("findings = %q", f)
	}
	var html bytes.Buffer
	if err := r.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(html.String(), "b0 (2 GPUs)") {
		t.Error("the report does not name the backend that completed nothing")
	}
}

func TestRunAllKeepsOrderAndStopsOnError(t *testing.T) {
	fleet, _ := config.Preset("homo")
	reg := policy.NewRegistry()
	var specs []RunSpec
	for _, pol := range []string{"round-robin", "waw", "least-request"} {
		specs = append(specs, RunSpec{FleetName: "homo", Fleet: fleet, Policy: pol, RPS: 50, Seed: 1,
			Warmup: 5 * time.Second, Measure: 5 * time.Second})
	}
	runs, err := RunAll(context.Background(), specs, reg, 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range runs {
		if r.Policy != specs[i].Policy || r.Engine != "half" {
			t.Errorf("run %d is %s/%s, want %s/half", i, r.Policy, r.Engine, specs[i].Policy)
		}
	}
	specs[1].Policy = "fastest"
	if _, err := RunAll(context.Background(), specs, reg, 2, nil); err == nil || !strings.Contains(err.Error(), "fastest") {
		t.Errorf("unknown policy: err = %v", err)
	}
}

func TestRoutingSpecs(t *testing.T) {
	full, err := RoutingSpecs(RoutingOptions{})
	if err != nil {
		t.Fatal(err)
	}
	quick, _ := RoutingSpecs(RoutingOptions{Quick: true})
	// 2 fleets x 2 rates x 7 policies x 3 seeds; quick: 2 x 1 x 7 x 1.
	if len(full) != 84 || len(quick) != 14 {
		t.Errorf("%d full runs and %d quick runs, want 84 and 14", len(full), len(quick))
	}
	if full[0].Warmup != 240*time.Second || full[0].Measure != 240*time.Second {
		t.Errorf("full study windows %v + %v, want 240s + 240s", full[0].Warmup, full[0].Measure)
	}
}
