package study

import (
	"bytes"
	"context"
	"math"
	"slices"
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

func TestBalanceTable(t *testing.T) {
	run := func(seed uint64, received [2]uint64, peak [2]float64) RunResult {
		r := result("homo", "pulsar-waw-tps", 450, seed, 100)
		r.Backends = []sim.BackendResult{
			{Name: "b0", Workers: 2, GatewayReceived: received[0], PeakInputTPS: peak[0], MaxInputTPS: 2 * peak[0]},
			{Name: "b1", Workers: 4, GatewayReceived: received[1], PeakInputTPS: peak[1], MaxInputTPS: 2 * peak[1]},
		}
		return r
	}
	// Seed 1: 90 and 110 requests, CoV 0.1; seed 2: equal, CoV 0.
	r := &Results{Study: "routing", Runs: []RunResult{
		run(1, [2]uint64{90, 110}, [2]float64{140_000, 400_000}),
		run(2, [2]uint64{100, 100}, [2]float64{160_000, 360_000}),
	}}
	c := r.Cells()[0]
	if math.Abs(c.ReqCoV-0.05) > 1e-9 {
		t.Errorf("request CoV = %v, want the mean of 0.1 and 0, 0.05", c.ReqCoV)
	}
	// Per GPU: 70k, 100k, 80k and 90k.
	if c.PeakLo != 70_000 || c.PeakHi != 100_000 || c.MaxLo != 140_000 || c.MaxHi != 200_000 {
		t.Errorf("per-GPU TPS ranges %v-%v and %v-%v, want 70k-100k and 140k-200k", c.PeakLo, c.PeakHi, c.MaxLo, c.MaxHi)
	}
	tab := r.BalanceTable()
	if want := []string{"homo", "450", "pulsar-waw-tps", "0.05", "70-100", "140-200"}; !slices.Equal(tab.Rows[0], want) {
		t.Errorf("balance row = %q, want %q", tab.Rows[0], want)
	}
}
