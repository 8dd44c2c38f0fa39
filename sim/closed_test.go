package sim

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/workload"
)

// closedCfg is one backend of workers half-scale GPUs behind one router,
// driven by a closed loop of clients with no think time.
func closedCfg(workers, clients, slots int) Config {
	wl := workload.DefaultConfig()
	wl.TurnsMin, wl.TurnsMax, wl.ThinkTimeMean = 2, 6, 0
	gw := gateway.DefaultConfig()
	gw.SlotsPerWorker = slots
	return Config{
		Regions: []Region{{"r", 1}}, Latency: [][]time.Duration{{0}}, ClientLatency: time.Millisecond,
		Backends: []BackendSpec{{Name: "b", Workers: workers, Profile: engine.HalfProfile()}},
		Gateway:  gw, Policy: "round-robin", Params: policy.DefaultParams(),
		Workload: wl, Client: client.DefaultConfig(),
		Clients: clients, Seed: 3, Warmup: 10 * time.Second, Measure: 30 * time.Second, KeepRecords: true,
	}
}

func TestClosedLoopKeepsEachClientToOneTurn(t *testing.T) {
	const clients = 6
	res := run(t, closedCfg(2, clients, 25))
	if res.Closed == nil || res.Closed.Clients != clients || res.Closed.Admitted == 0 || res.Closed.Steps == 0 {
		t.Fatalf("closed result %+v", res.Closed)
	}
	recs := res.Records
	if len(recs) == 0 || res.Summary.Completed == 0 {
		t.Fatalf("no turns measured: %+v", res.Summary)
	}
	// At no instant are more turns in progress than there are clients.
	type edge struct {
		at    time.Duration
		delta int
	}
	var edges []edge
	for _, r := range recs {
		edges = append(edges, edge{r.Start, 1}, edge{r.End, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	open, most := 0, 0
	for _, e := range edges {
		open += e.delta
		most = max(most, open)
	}
	if most > clients {
		t.Errorf("%d turns in progress at once with %d clients", most, clients)
	}
	// With no think time a session's next turn starts when the previous ends.
	bySession := map[uint64][]int{}
	for i, r := range recs {
		bySession[r.Session] = append(bySession[r.Session], i)
	}
	checked := 0
	for _, idx := range bySession {
		for k := 1; k < len(idx); k++ {
			prev, cur := recs[idx[k-1]], recs[idx[k]]
			if cur.Turn == prev.Turn+1 {
				checked++
				if cur.Start != prev.End {
					t.Fatalf("session %d turn %d started at %v, the previous turn ended at %v", cur.Session, cur.Turn, cur.Start, prev.End)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no consecutive turns to check")
	}
	b := res.Backends[0]
	if sum := b.GatewayCompleted + b.GatewayCancelled + b.GatewayRejected + uint64(b.GatewayActive+b.GatewayWaiting); sum != b.GatewayReceived {
		t.Errorf("gateway received %d, accounted %d", b.GatewayReceived, sum)
	}
	if b.GatewayActive+b.GatewayWaiting > clients {
		t.Errorf("%d requests at the gateway at the end with %d clients", b.GatewayActive+b.GatewayWaiting, clients)
	}
}

func TestClosedLoopDeterministic(t *testing.T) {
	cfg := closedCfg(2, 8, 2)
	a, _ := json.Marshal(run(t, cfg))
	b, _ := json.Marshal(run(t, cfg))
	if !bytes.Equal(a, b) {
		t.Fatal("same config and seed gave different results")
	}
	cfg.Seed++
	if c, _ := json.Marshal(run(t, cfg)); bytes.Equal(a, c) {
		t.Fatal("a different seed gave the same result")
	}
}

// TestSlotsPerWorkerBoundEachWorker: with one slot per worker no worker ever
// runs two requests, even when a session's cached worker is busy, and the
// fleet completes fewer turns than with the engine's own limit.
func TestSlotsPerWorkerBoundEachWorker(t *testing.T) {
	one, full := run(t, closedCfg(3, 12, 1)), run(t, closedCfg(3, 12, 25))
	if b := one.Backends[0].MeanBatch; b > 1+1e-9 || b < 0.99 { // a time-weighted mean, so up to rounding
		t.Errorf("one slot per worker: mean batch %.3f, want 1", b)
	}
	if b := full.Backends[0].MeanBatch; b < 2 {
		t.Errorf("25 slots per worker with 12 clients on 3 workers: mean batch %.3f, want > 2", b)
	}
	if one.Summary.Completed >= full.Summary.Completed {
		t.Errorf("one slot completed %d turns, 25 slots %d: batching should win", one.Summary.Completed, full.Summary.Completed)
	}
	if one.Closed.GatewayQueueMeanS <= full.Closed.GatewayQueueMeanS {
		t.Errorf("gateway queue mean %.3f s with one slot, %.3f s with 25: one slot should queue more",
			one.Closed.GatewayQueueMeanS, full.Closed.GatewayQueueMeanS)
	}
}
