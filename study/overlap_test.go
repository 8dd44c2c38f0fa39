package study

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
)

func TestOverlapShort(t *testing.T) {
	res, err := Overlap(context.Background(), policy.NewRegistry(), OverlapOptions{Seeds: 1, Clients: []int{2, 48}, Slots: []int{1, 25},
		Warmup: 10 * time.Second, Measure: 20 * time.Second, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 4 {
		t.Fatalf("%d runs, want 4", len(res.Runs))
	}
	get := func(clients, slots int) OverlapRun {
		for _, r := range res.Runs {
			if r.Clients == clients && r.Slots == slots {
				return r
			}
		}
		t.Fatalf("no run with %d clients and %d slots", clients, slots)
		return OverlapRun{}
	}
	for _, r := range res.Runs {
		// Accounting closes: every request the gateway received completed,
		// was cancelled or rejected, or is still there at the end.
		if sum := r.GatewayCompleted + r.GatewayCancelled + r.GatewayRejected + uint64(r.GatewayOpen); sum != r.GatewayReceived {
			t.Errorf("%d clients, %d slots: gateway received %d, accounted %d", r.Clients, r.Slots, r.GatewayReceived, sum)
		}
		if r.Completed+r.Failures != r.Turns || r.Completed == 0 || r.GatewayOpen > r.Clients {
			t.Errorf("%d clients, %d slots: %d turns, %d completed, %d failed, %d open at the gateway", r.Clients, r.Slots, r.Turns, r.Completed, r.Failures, r.GatewayOpen)
		}
		if r.Slots == 1 && r.MeanBatch > 1+1e-9 {
			t.Errorf("%d clients, one slot per worker: mean batch %.3f > 1", r.Clients, r.MeanBatch)
		}
		if r.Degraded > r.Completed || r.Degraded < max(r.Late, r.Preempted) || r.Degraded > r.Late+r.Preempted {
			t.Errorf("degraded %d is not the union of late %d and preempted %d over %d completed", r.Degraded, r.Late, r.Preempted, r.Completed)
		}
	}
	// With fewer clients than workers the bound never binds: same runs.
	if a, b := get(2, 1), get(2, 25); a.RequestsPS != b.RequestsPS || a.ClientP95S != b.ClientP95S {
		t.Errorf("2 clients on 4 workers: one slot %.3f req/s p95 %.3f s, 25 slots %.3f req/s p95 %.3f s; want equal",
			a.RequestsPS, a.ClientP95S, b.RequestsPS, b.ClientP95S)
	}
	// Under load one slot per worker loses the engine's batching.
	one, def := get(48, 1), get(48, 25)
	if one.RequestsPS >= def.RequestsPS || one.MeanBatch >= def.MeanBatch || one.QueueMeanS <= def.QueueMeanS {
		t.Errorf("48 clients: one slot %.2f req/s batch %.2f queue %.2f s; 25 slots %.2f req/s batch %.2f queue %.2f s",
			one.RequestsPS, one.MeanBatch, one.QueueMeanS, def.RequestsPS, def.MeanBatch, def.QueueMeanS)
	}
	found := false
	for _, w := range res.Winners() {
		if w.Clients == 48 && w.Metric == "requests/s" {
			found = true
			if len(w.Slots) != 1 || w.Slots[0] != 25 {
				t.Errorf("48 clients: requests/s won by %v, want [25]", w.Slots)
			}
		}
	}
	if !found {
		t.Error("no requests/s winner at 48 clients")
	}
	var js, html, txt bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	tab := res.Table()
	if err := tab.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"winners"`) || !strings.Contains(html.String(), "<svg") || !strings.Contains(txt.String(), "degraded %") {
		t.Error("report files are missing their parts")
	}
}

func TestOverlapSpecsRejectBadOptions(t *testing.T) {
	for _, o := range []OverlapOptions{{Seeds: -1}, {Clients: []int{0}}, {Slots: []int{0, 25}}, {Warmup: -time.Second, Measure: time.Second}} {
		if _, err := OverlapSpecs(o); !errors.Is(err, ErrBadOverlapOptions) {
			t.Errorf("%+v: error %v, want ErrBadOverlapOptions", o, err)
		}
	}
	specs, err := OverlapSpecs(OverlapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(OverlapClients) * len(OverlapSlots) * 3; len(specs) != want {
		t.Errorf("%d runs, want %d", len(specs), want)
	}
}
