package sim_test

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/cputime"
	"github.com/stargate-llm/stargate/internal/slowtest"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
)

// heteroRuns is one configuration of the hetero fleet at the reference rate
// (450 req/s) per seed 1..n.
func heteroRuns(tb testing.TB, reg *policy.Registry, pol string, n int, warmup, measure time.Duration) []sim.Config {
	tb.Helper()
	fleet, ok := config.Preset("hetero")
	if !ok {
		tb.Fatal("no hetero preset")
	}
	cfgs := make([]sim.Config, n)
	for i := range cfgs {
		cfg, err := fleet.SimConfig(config.Run{Policy: pol, RPS: 450, Seed: uint64(i + 1), Warmup: warmup, Measure: measure}, reg)
		if err != nil {
			tb.Fatal(err)
		}
		cfgs[i] = cfg
	}
	return cfgs
}

// TestInterleavedIsApart checks RunInterleaved, which BenchmarkTenfold
// relies on: runs handled one event of each in turn give the results each
// gives alone.
func TestInterleavedIsApart(t *testing.T) {
	reg := policy.NewRegistry()
	for _, pol := range []string{"pulsar-waw", "waw", "round-robin"} {
		cfgs := heteroRuns(t, reg, pol, 3, 5*time.Second, 10*time.Second)
		together, err := sim.RunInterleaved(context.Background(), cfgs, reg)
		if err != nil {
			t.Fatal(err)
		}
		for i, cfg := range cfgs {
			alone, err := sim.Run(context.Background(), cfg, reg)
			if err != nil {
				t.Fatal(err)
			}
			if alone.Events == 0 {
				t.Fatalf("%s seed %d: no event handled", pol, i+1)
			}
			if !reflect.DeepEqual(alone, together[i]) {
				t.Errorf("%s seed %d: interleaved result differs from the run alone", pol, i+1)
			}
		}
	}
}

// cpuPerRun times op, which does runs simulation runs, and reports the CPU
// time of one run (cpu-s/run): CPU rather than wall time, as this machine
// is shared.
func cpuPerRun(b *testing.B, runs int, op func() error) {
	cpu := cputime.Used()
	for b.Loop() {
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric((cputime.Used()-cpu).Seconds()/float64(b.N*runs), "cpu-s/run")
}

// BenchmarkTenfold asks how much of the cost of a run ten times the size
// (BenchmarkScale's 10x) is the work and how much the memory. For each
// policy, 240 s + 240 s (or STARGATE_SCALE_WINDOW) on the hetero fleet:
//
//   - x1: one run at the reference rate, 450 req/s (seed 1);
//   - ten-apart: ten such runs (seeds 1-10), one after another;
//   - ten-together: the same ten runs, handled one event of each in turn;
//   - x10: one run of the fleet copied ten times at 4,500 req/s (seed 1).
//
// Each reports the CPU per run: for ten-apart and ten-together, the mean
// of the ten.
// ten-apart and ten-together do exactly the same work. Together, the
// processor works over ten runs' memory between two events of one run, as
// in the x10 run, so their ratio is what a tenfold working set costs where
// no work grows tenfold. BENCHMARKS.md ("Work against memory: ten 1x runs
// in one memory") has the command and the figures. -short skips it.
func BenchmarkTenfold(b *testing.B) {
	if testing.Short() {
		b.Skip("ten 1x runs twice and a 10x run per policy take minutes")
	}
	reg := policy.NewRegistry()
	warmup, measure := slowtest.ScaleWindow(b)
	tenfold, err := config.Load(filepath.Join("..", "examples", "hetero-10x.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for _, pol := range []string{"pulsar-waw", "waw", "round-robin"} {
		ten := heteroRuns(b, reg, pol, 10, warmup, measure)
		x10, err := tenfold.SimConfig(config.Run{Policy: pol, RPS: 4500, Seed: 1, Warmup: warmup, Measure: measure}, reg)
		if err != nil {
			b.Fatal(err)
		}
		modes := []struct {
			name string
			runs int
			run  func() error
		}{
			{"x1", 1, func() error { _, err := sim.Run(context.Background(), ten[0], reg); return err }},
			{"ten-apart", len(ten), func() error {
				for _, cfg := range ten {
					if _, err := sim.Run(context.Background(), cfg, reg); err != nil {
						return err
					}
				}
				return nil
			}},
			{"ten-together", len(ten), func() error { _, err := sim.RunInterleaved(context.Background(), ten, reg); return err }},
			{"x10", 1, func() error { _, err := sim.Run(context.Background(), x10, reg); return err }},
		}
		for _, m := range modes {
			b.Run(pol+"/"+m.name, func(b *testing.B) { cpuPerRun(b, m.runs, m.run) })
		}
	}
}

// BenchmarkWorkingSet runs k copies of one 1x run (the hetero fleet at 450
// req/s, seed 1, 240 s + 240 s or STARGATE_SCALE_WINDOW) handled one event
// of each in turn, for k from 1 to 20, and reports the CPU per run. Every
// copy does the same work in its own memory, so the cost per run rising
// with k is what a working set k times as large costs this loop on the
// machine running it. BENCHMARKS.md ("Work against memory: ten 1x runs in
// one memory") has the figures. -short skips it.
func BenchmarkWorkingSet(b *testing.B) {
	if testing.Short() {
		b.Skip("38 1x runs per policy take minutes")
	}
	reg := policy.NewRegistry()
	warmup, measure := slowtest.ScaleWindow(b)
	for _, pol := range []string{"pulsar-waw", "round-robin"} {
		one := heteroRuns(b, reg, pol, 1, warmup, measure)[0]
		for _, k := range []int{1, 2, 5, 10, 20} {
			copies := make([]sim.Config, k)
			for i := range copies {
				copies[i] = one
			}
			b.Run(fmt.Sprintf("%s/copies=%d", pol, k), func(b *testing.B) {
				cpuPerRun(b, k, func() error { _, err := sim.RunInterleaved(context.Background(), copies, reg); return err })
			})
		}
	}
}
