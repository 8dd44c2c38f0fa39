package plan

import (
	"context"
	"math"
	"testing"
	"time"
)

// TestAdaptiveVerifyKeepsRecommendation: stopping a fleet's seeds once its
// outcome is decided, screening the fleets expected to miss and pruning
// candidates that cannot beat the best recommend the same fleet as
// running every seed for every fleet, with fewer simulated requests.
func TestAdaptiveVerifyKeepsRecommendation(t *testing.T) {
	h100, l4 := preset(t, "h100-llama3.1-8b"), preset(t, "l4-llama3.1-8b")
	w := Workload{CDF: readCDF(t, "chat-cdf.json"), Lambda: 20}
	choice := PoolChoice{Short: []*Profile{l4}, Long: []*Profile{h100}, Thresholds: []int{512}}
	run := func(all bool) (*Optimized, int) {
		o := shortOptions(2 * time.Second)
		o.Seeds = []uint64{1, 2, 3}
		o.AllSeeds = all
		pl, err := New(w, o)
		if err != nil {
			t.Fatal(err)
		}
		res, err := pl.Optimize(context.Background(), choice, 2)
		if err != nil {
			t.Fatal(err)
		}
		if res.Best == nil {
			t.Fatalf("all seeds %v: no fleet met the target", all)
		}
		reqs := 0
		for _, v := range res.Verified {
			for _, e := range append([]*Eval{v.Eval}, v.Smaller...) {
				if e != nil {
					reqs += e.Requests
				}
			}
		}
		return res, reqs
	}
	full, fullReqs := run(true)
	fast, fastReqs := run(false)
	if full.Best.Eval.Fleet.String() != fast.Best.Eval.Fleet.String() {
		t.Fatalf("adaptive recommends %s, every seed %s", fast.Best.Eval.Fleet, full.Best.Eval.Fleet)
	}
	if fastReqs >= fullReqs {
		t.Errorf("adaptive measured %d requests, every seed %d: want fewer", fastReqs, fullReqs)
	}
	t.Logf("recommended %s; measured requests %d adaptive, %d with every seed", fast.Best.Eval.Fleet, fastReqs, fullReqs)
}

// TestKVReserveFleetSim: with the Fleet Sim model's H100 profile, reserving
// max context gives its slots (min of max_slots x calibration_ctx / max
// context and KV blocks / blocks of max context: 170 at 6,144 tokens, 16 at
// 65,536) and its analytical fleet on its Azure workload (9 + 5 H100s);
// the mean request gives more slots and fewer instances, paged in between.
func TestKVReserveFleetSim(t *testing.T) {
	sizes := map[KVReserve][]int{}
	for _, kv := range []KVReserve{KVMean, KVMaxContext, KVPaged} {
		o := DefaultOptions(500 * time.Millisecond)
		o.KVReserve = kv
		pl, choice := azurePlanner(t, o)
		f := Fleet{Pools: []PoolSpec{{Name: "short", Profile: choice.Short[0], MaxTokens: 6144},
			{Name: "long", Profile: choice.Long[0], MaxTokens: 65536}}}
		models, err := pl.Models(f)
		if err != nil {
			t.Fatal(err)
		}
		c := pl.Size(f, 200)
		if c.Err != "" {
			t.Fatalf("%s: %s", kv, c.Err)
		}
		sizes[kv] = []int{models[0].Slots, models[1].Slots, c.Fleet.Pools[0].Instances, c.Fleet.Pools[1].Instances}
	}
	if got := sizes[KVMaxContext]; got[0] != 170 || got[1] != 16 || got[2] != 9 || got[3] != 5 {
		t.Errorf("max-context: slots %d/%d, instances %d+%d; want the Fleet Sim model's 170/16 and 9+5", got[0], got[1], got[2], got[3])
	}
	mean, paged, mc := sizes[KVMean], sizes[KVPaged], sizes[KVMaxContext]
	if mean[0] <= mc[0] || mean[2]+mean[3] >= mc[2]+mc[3] {
		t.Errorf("mean: %v, max-context %v: want more slots and fewer instances", mean, mc)
	}
	if paged[1] < mc[1] || paged[2]+paged[3] >= mc[2]+mc[3] {
		t.Errorf("paged: %v, max-context %v: want no fewer long-pool slots and fewer instances", paged, mc)
	}
	t.Logf("slots short/long, instances short+long: mean %v, max-context %v, paged %v", mean, mc, paged)
}

func TestPagedSlots(t *testing.T) {
	// No spread: exactly kv / mu sequences.
	if n := pagedSlots(1000, 10, 0, 1000); n != 100 {
		t.Errorf("pagedSlots(1000, 10, 0) = %d, want 100", n)
	}
	// A spread leaves a margin; the limit caps.
	n := pagedSlots(1000, 10, 5, 1000)
	if n >= 100 || float64(n)*10+z99*5*math.Sqrt(float64(n)) > 1000 || float64(n+1)*10+z99*5*math.Sqrt(float64(n+1)) <= 1000 {
		t.Errorf("pagedSlots(1000, 10, 5) = %d: not the largest n within the 0.99 quantile", n)
	}
	if n := pagedSlots(1000, 10, 0, 7); n != 7 {
		t.Errorf("limit 7: got %d", n)
	}
	for _, s := range []string{"", "mean", "max-context", "paged"} {
		if _, err := ParseKVReserve(s); err != nil {
			t.Errorf("ParseKVReserve(%q): %v", s, err)
		}
	}
	if _, err := ParseKVReserve("max"); err == nil {
		t.Error("ParseKVReserve(max): want an error")
	}
	if _, err := New(Workload{CDF: readCDF(t, "chat-cdf.json"), Lambda: 1}, Options{SLO: time.Second, UtilCap: 0.85, Policy: "least-request",
		Seeds: []uint64{1}, Measure: time.Second, MaxInstances: 1, KVReserve: "bogus"}); err == nil {
		t.Error("New with KV reservation bogus: want an error")
	}
}
