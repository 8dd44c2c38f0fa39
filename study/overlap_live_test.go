package study

import (
	"context"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/slowtest"
	"github.com/stargate-llm/stargate/policy"
)

// TestLiveOverlapShort runs two short live cells: eight clients on four
// workers of one slot each must wait at the gateway and never batch, while
// the default slots batch them; the gateway's accounting closes, and every
// live run has its simulator twin.
func TestLiveOverlapShort(t *testing.T) {
	slowtest.Skip(t, "live fleet")
	res, err := LiveOverlap(context.Background(), policy.NewRegistry(), OverlapOptions{Clients: []int{8}, Slots: []int{1, 25},
		Warmup: time.Second, Measure: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Live || res.Sim == nil || len(res.Runs) != 2 || len(res.Sim.Runs) != 2 {
		t.Fatalf("results %+v", res)
	}
	one, def := res.Runs[0], res.Runs[1]
	if one.Slots != 1 || def.Slots != 25 {
		t.Fatalf("slots %d and %d", one.Slots, def.Slots)
	}
	if one.Completed == 0 || def.Completed == 0 || one.Failures != 0 || def.Failures != 0 {
		t.Fatalf("runs %+v / %+v", one, def)
	}
	if one.MeanBatch > 1.0001 || one.QueueMeanS <= 0 {
		t.Fatalf("one slot per worker: mean batch %.3f, gateway queue %.3f s", one.MeanBatch, one.QueueMeanS)
	}
	if def.MeanBatch <= 1.05 || def.QueueMeanS > 0.01 {
		t.Fatalf("25 slots per worker: mean batch %.3f, gateway queue %.3f s", def.MeanBatch, def.QueueMeanS)
	}
	for _, m := range res.Runs {
		if m.StepMeanMS <= 0 || m.GatewayReceived != m.GatewayCompleted+m.GatewayCancelled+m.GatewayRejected+uint64(m.GatewayOpen) {
			t.Fatalf("run %+v", m)
		}
	}
}
