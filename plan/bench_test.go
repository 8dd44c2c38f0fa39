package plan

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/cputime"
)

// azurePlanner is the Fleet Sim model's Azure CDF workload at 200 req/s
// with a 500 ms P99 TTFT target, and its H100 profile.
func azurePlanner(tb testing.TB, o Options) (*Planner, PoolChoice) {
	tb.Helper()
	data, err := os.ReadFile(filepath.Join("..", "examples", "plan", "fleet-sim-h100.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	h100, err := ParseProfile("fleet-sim-h100.yaml", data)
	if err != nil {
		tb.Fatal(err)
	}
	pl, err := New(Workload{CDF: readCDF(tb, "azure-cdf.json"), Lambda: 200}, o)
	if err != nil {
		tb.Fatal(err)
	}
	return pl, PoolChoice{Short: []*Profile{h100}, Long: []*Profile{h100}, Thresholds: []int{6144}, LongMax: 65536}
}

// BenchmarkOptimizeAzure is plan optimize on the Fleet Sim model's Azure
// CDF (200 req/s, P99 TTFT 500 ms, pools split at 6,144 tokens, its H100
// profile): the analytical ranking alone, and the whole optimize with the
// DES verification of the top three (the command's defaults). cpu-s/op is
// the process's CPU time, which a loaded machine inflates less than wall
// time; run with GOMAXPROCS=1 for one core.
func BenchmarkOptimizeAzure(b *testing.B) {
	for _, bc := range []struct {
		name string
		topK int
	}{{"analytical", 0}, {"optimize", 3}} {
		b.Run(bc.name, func(b *testing.B) {
			cpu := cputime.Used()
			for b.Loop() {
				pl, choice := azurePlanner(b, DefaultOptions(500*time.Millisecond))
				res, err := pl.Optimize(context.Background(), choice, bc.topK)
				if err != nil {
					b.Fatal(err)
				}
				if bc.topK > 0 && res.Best == nil {
					b.Fatal("no fleet met the target")
				}
			}
			b.ReportMetric((cputime.Used()-cpu).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
