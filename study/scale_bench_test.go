package study

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/cputime"
	"github.com/stargate-llm/stargate/internal/slowtest"
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

// BenchmarkScale runs the hetero fleet copied N times at N times the
// reference rate (450 req/s), 240 s + 240 s, for the policies whose cost
// the scale work measured: wall time per run and requests (attempts reaching
// a gateway, warm-up included) per wall second show whether the simulator's
// cost grows linearly with the fleet. BENCHMARKS.md
// ("The simulator at 1x, 10x and 100x the hetero fleet") has the commands.
func BenchmarkScale(b *testing.B) {
	reg := policy.NewRegistry()
	for _, n := range []int{1, 10, 100} {
		fleet := scaleFleet(b, n)
		for _, pol := range []string{"pulsar-waw", "waw", "round-robin"} {
			b.Run(fmt.Sprintf("x%d/%s", n, pol), func(b *testing.B) {
				if n == 100 && testing.Short() {
					b.Skip("100x takes minutes")
				}
				warm, meas := slowtest.ScaleWindow(b)
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
