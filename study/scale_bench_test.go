package study

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/cputime"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
)

// scaleFleet loads the hetero fleet at 1x (the preset) or a copy from
// examples/hetero-Nx.yaml.
func scaleFleet(tb testing.TB, n int) *config.Fleet {
	tb.Helper()
	if n == 1 {
		f, _ := config.Preset("hetero")
		return f
	}
	f, err := config.Load(filepath.Join("..", "examples", fmt.Sprintf("hetero-%dx.yaml", n)))
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// scaleWindow is the warm-up and measured window of BenchmarkScale: 240 s +
// 240 s, or STARGATE_SCALE_WINDOW ("60s+60s") for a shorter run to profile.
func scaleWindow(tb testing.TB) (warmup, measure time.Duration) {
	tb.Helper()
	w := os.Getenv("STARGATE_SCALE_WINDOW")
	if w == "" {
		return 240 * time.Second, 240 * time.Second
	}
	a, m, ok := strings.Cut(w, "+")
	if !ok {
		tb.Fatalf("STARGATE_SCALE_WINDOW %q: want WARMUP+MEASURE, such as 60s+60s", w)
	}
	warmup, err := time.ParseDuration(a)
	if err != nil {
		tb.Fatalf("STARGATE_SCALE_WINDOW %q: warm-up: %v", w, err)
	}
	measure, err = time.ParseDuration(m)
	if err != nil {
		tb.Fatalf("STARGATE_SCALE_WINDOW %q: measure: %v", w, err)
	}
	return warmup, measure
}

// BenchmarkScale runs the hetero fleet copied N times at N times the
// reference rate (450 req/s), 240 s + 240 s, for the policies whose cost
// the scale work measured: wall time per run and requests (attempts reaching
// a gateway, warm-up included) per wall second show whether the simulator's
// cost grows linearly with the fleet. BENCHMARKS.md ("Scale") has the commands.
func BenchmarkScale(b *testing.B) {
	reg := policy.NewRegistry()
	for _, n := range []int{1, 10, 100} {
		fleet := scaleFleet(b, n)
		for _, pol := range []string{"pulsar-waw", "waw", "round-robin"} {
			b.Run(fmt.Sprintf("x%d/%s", n, pol), func(b *testing.B) {
				if n == 100 && testing.Short() {
					b.Skip("100x takes minutes")
				}
				warm, meas := scaleWindow(b)
				cfg, err := fleet.SimConfig(config.Run{Policy: pol, RPS: 450 * float64(n), Seed: 1,
					Warmup: warm, Measure: meas}, reg)
				if err != nil {
					b.Fatal(err)
				}
				var requests uint64
				cpu := cputime.Used()
				for b.Loop() {
					res, err := sim.Run(context.Background(), cfg, reg)
					if err != nil {
						b.Fatal(err)
					}
					requests = 0
					for _, be := range res.Backends {
						requests += be.GatewayReceived
					}
				}
				cpuS := (cputime.Used() - cpu).Seconds() / float64(b.N)
				b.ReportMetric(cpuS, "cpu-s/run")
				b.ReportMetric(float64(requests)/cpuS, "requests/cpu-s")
				b.ReportMetric(float64(requests), "requests/run")
				b.ReportMetric(float64(requests)/(b.Elapsed().Seconds()/float64(b.N)), "requests/wall-s")
			})
		}
	}
}
