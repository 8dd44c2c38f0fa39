package sim

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/workload"
)

// TestPrefixPolicyOnTrace: requests that share a one-block document but
// not their second block have different session keys, so pulsar-waw
// spreads each document over the backends; the prefix policy, given the
// trace's block ids through the router, sends a document's requests where
// it is cached and reuses more. Its runs are deterministic.
func TestPrefixPolicyOnTrace(t *testing.T) {
	var reqs []workload.TraceRequest
	for i := range 90 {
		doc := uint64(i % 6)
		reqs = append(reqs, workload.TraceRequest{Arrival: time.Duration(i) * 400 * time.Millisecond,
			InputTokens: 512 + 400, OutputTokens: 10, BlockHashes: []uint64{doc + 1, uint64(1000 + i)}})
	}
	cfg := openCfg(reqs)
	cfg.Pools = nil
	for i := range cfg.Backends {
		cfg.Backends[i].Pool = 0
	}
	cfg.Warmup, cfg.Measure = 0, 40*time.Second
	reuse := map[string]float64{}
	for _, pol := range []string{"pulsar-waw", policy.PrefixName} {
		cfg.Policy = pol
		res := run(t, cfg)
		reuse[pol] = res.Summary.ReusePct
		if pol == policy.PrefixName {
			a, _ := json.Marshal(res)
			b, _ := json.Marshal(run(t, cfg))
			if !bytes.Equal(a, b) {
				t.Fatal("prefix: same config and seed gave different results")
			}
		}
	}
	t.Logf("reuse %%: %v", reuse)
	// Each document misses once under prefix (6 of 90); under pulsar-waw
	// once per backend it lands on.
	if want := 100 * float64(84*512) / float64(90*912); reuse[policy.PrefixName] < want-0.01 {
		t.Errorf("prefix reuses %.2f%%, want %.2f%% (every document cached once)", reuse[policy.PrefixName], want)
	}
	if reuse[policy.PrefixName] <= reuse["pulsar-waw"] {
		t.Errorf("prefix reuses %.2f%%, pulsar-waw %.2f%%: the index gained nothing", reuse[policy.PrefixName], reuse["pulsar-waw"])
	}
}
