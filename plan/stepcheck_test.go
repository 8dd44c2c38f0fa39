package plan

import (
	"math"
	"testing"
	"time"
)

// TestStepRateBoundsMeanContext measures, on the Fleet Sim model's Azure
// pools, how far the analytical service rate of one instance (Slots /
// E[S]) is from a step-by-step run that charges each sequence its own
// context, with the one mean context over requests (mean) and the mean
// context in flight (paged): the in-flight mean is the closer.
func TestStepRateBoundsMeanContext(t *testing.T) {
	off := map[KVReserve]float64{}
	for _, kv := range []KVReserve{KVMean, KVPaged} {
		o := DefaultOptions(500 * time.Millisecond)
		o.KVReserve = kv
		pl, choice := azurePlanner(t, o)
		f := Fleet{Pools: []PoolSpec{{Name: "short", Profile: choice.Short[0], MaxTokens: 6144},
			{Name: "long", Profile: choice.Long[0], MaxTokens: 65536}}}
		models, err := pl.Models(f)
		if err != nil {
			t.Fatal(err)
		}
		a := pl.assign(f, pl.o.PoolRouter)
		for i, m := range models {
			analytic := float64(m.Slots) / m.MeanService.Seconds()
			rate, step := StepRate(m, a.pools[i], 20000, 1)
			errPct := 100 * (analytic/rate - 1)
			t.Logf("%s %s: %d slots, analytical %.1f req/s (step %.1f ms), step by step %.1f req/s (step %.1f ms): %+.1f%%",
				kv, m.Name, m.Slots, analytic, m.Step.Seconds()*1000, rate, step*1000, errPct)
			if i == 0 {
				off[kv] = math.Abs(errPct)
			}
			if kv == KVPaged && math.Abs(errPct) > 15 {
				t.Errorf("paged %s: analytical rate off by %.1f%% from the step-by-step run", m.Name, errPct)
			}
		}
	}
	if off[KVPaged] >= off[KVMean] {
		t.Errorf("short pool: the in-flight context is off by %.1f%%, the request mean by %.1f%%: want the in-flight closer", off[KVPaged], off[KVMean])
	}
}
