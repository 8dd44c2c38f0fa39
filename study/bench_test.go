package study

import (
	"context"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
)

// BenchmarkReferenceRun is the routing study's reference run: hetero,
// pulsar-waw, 450 req/s, seed 1, 240 s + 240 s, on one core.
func BenchmarkReferenceRun(b *testing.B) {
	fleet, _ := config.Preset("hetero")
	reg := policy.NewRegistry()
	cfg, err := fleet.SimConfig(config.Run{Policy: "pulsar-waw", RPS: 450, Seed: 1, Warmup: 240 * time.Second, Measure: 240 * time.Second}, reg)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var events uint64
	for b.Loop() {
		res, err := sim.Run(context.Background(), cfg, reg)
		if err != nil {
			b.Fatal(err)
		}
		events = res.Events
	}
	b.ReportMetric(float64(events), "events/run")
}
