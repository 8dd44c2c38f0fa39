package sim

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/engine"
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

// TestHostTierRaisesReuseOnTrace: a slice of the Mooncake conversation
// trace on two backends whose GPUs' KV cannot hold what the trace reuses:
// with a host tier on every GPU, blocks the GPUs evict are found again in
// host memory, and reuse rises by the host's share; without one the host
// share is zero. Same config and seed, same result.
func TestHostTierRaisesReuseOnTrace(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "traces", "mooncake", "conversation_trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	all, err := workload.ReadMooncake(f)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []workload.TraceRequest
	for _, r := range all {
		if r.Arrival < 15*time.Minute {
			reqs = append(reqs, r)
		}
	}
	gpu := engine.FullProfile()
	gpu.KVTokens = 250_000
	host := gpu
	host.HostKVTokens, host.HostKVLoadTokensPerS = 1_000_000, engine.FullHostLoadTokensPerS
	res := map[bool]*Result{}
	for _, withHost := range []bool{false, true} {
		cfg := openCfg(reqs)
		cfg.Pools = nil
		p := gpu
		if withHost {
			p = host
		}
		cfg.Backends = []BackendSpec{{Name: "b0", Workers: 2, Profile: p}, {Name: "b1", Workers: 2, Profile: p}}
		cfg.Policy = policy.PrefixName
		cfg.Warmup, cfg.Measure = 5*time.Minute, 10*time.Minute
		res[withHost] = run(t, cfg)
		if withHost {
			a, _ := json.Marshal(res[withHost])
			b, _ := json.Marshal(run(t, cfg))
			if !bytes.Equal(a, b) {
				t.Fatal("host tier: same config and seed gave different results")
			}
		}
	}
	off, on := res[false].Summary, res[true].Summary
	t.Logf("reuse %.1f%% without a host tier; %.1f%% with (%.1f%% from the host); SLO %.1f%% and %.1f%%",
		off.ReusePct, on.ReusePct, on.HostReusePct, off.SLOPct, on.SLOPct)
	if off.HostReusePct != 0 {
		t.Errorf("no host tier, yet %.1f%% of prompt tokens came from it", off.HostReusePct)
	}
	if on.HostReusePct <= 0 || on.HostReusePct > on.ReusePct {
		t.Errorf("host share %.1f%% of reuse %.1f%%: want a share above zero, within the reuse", on.HostReusePct, on.ReusePct)
	}
	if on.ReusePct < off.ReusePct+5 {
		t.Errorf("reuse %.1f%% with a host tier, %.1f%% without: want at least 5 points more", on.ReusePct, off.ReusePct)
	}
	if on.Completed < off.Completed || on.TTFTP50S > off.TTFTP50S {
		t.Errorf("host tier completed %d turns (TTFT p50 %.2f s), without %d (%.2f s): loading should not cost more than recomputing",
			on.Completed, on.TTFTP50S, off.Completed, off.TTFTP50S)
	}
}
