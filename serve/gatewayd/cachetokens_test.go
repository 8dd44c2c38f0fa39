package gatewayd

import (
	"testing"

	"github.com/stargate-llm/stargate/engine"
	core "github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/serve/engined"
)

// TestStatsCacheTokens: the gateway's stats carry its engines' cache size,
// GPU KV and host tier, from vllm:cache_config_info: an engine's labels
// count all its GPUs, so one engine shared by workers counts once and
// several engine URLs add up.
func TestStatsCacheTokens(t *testing.T) {
	engineOf := func(p engine.Profile, gpus int) *liveEngine {
		cfg := engined.DefaultConfig()
		cfg.Key, cfg.Profile, cfg.GPUs = testKey, p, gpus
		return serveEngine(t, "127.0.0.1:0", cfg)
	}
	// What one GPU of profile p caches, in whole 16-token blocks as the
	// engine exports it.
	perGPU := func(p engine.Profile) int { return (p.KVTokens/16 + p.HostKVTokens/16) * 16 }
	host, plain := engine.FullHostProfile(), engine.FullProfile()

	hostEng := engineOf(host, 2)
	g, _ := startGateway(t, "http://"+hostEng.addr, nil)
	if got, want := g.message(&core.Stats{}, "").CacheTokens, 2*perGPU(host); got != want {
		t.Errorf("one full-host engine of 2 GPUs: cache tokens %d, want %d (GPU KV and host tier)", got, want)
	}
	if perGPU(host) <= perGPU(plain) {
		t.Fatalf("the full-host profile has no host tier to count: %d tokens a GPU, %d without", perGPU(host), perGPU(plain))
	}

	plainEng := engineOf(plain, 1)
	g, _ = startGateway(t, "http://"+plainEng.addr, func(c *Config) { c.Engines = append(c.Engines, "http://"+hostEng.addr) })
	if got, want := g.message(&core.Stats{}, "").CacheTokens, perGPU(plain)+2*perGPU(host); got != want {
		t.Errorf("two engine URLs: cache tokens %d, want their sum %d", got, want)
	}
}

// TestCacheTokensSum: the stats' sum over engine URLs is 0 while any
// engine's size is unknown, and never beyond the wire's bound.
func TestCacheTokensSum(t *testing.T) {
	tests := []struct {
		name    string
		engines []int
		want    int
	}{
		{"none scraped", nil, 0},
		{"one", []int{1000}, 1000},
		{"two", []int{1000, 500}, 1500},
		{"one unknown", []int{1000, 0}, 0},
		{"capped", []int{1<<31 - 1, 1<<31 - 1, 5}, 1<<31 - 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{}
			found := make([]engineScrape, len(tt.engines))
			for i, n := range tt.engines {
				found[i].ok, found[i].m.CacheTokens = true, n
			}
			s.noteCacheTokens(found)
			if got := s.cacheTokens(); got != tt.want {
				t.Errorf("cache tokens %d, want %d", got, tt.want)
			}
		})
	}
}
