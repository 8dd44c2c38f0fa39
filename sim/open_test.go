package sim

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/workload"
)

// openCfg is one region, one router, two pools: short (<= 4,000 tokens, two
// backends) and long (<= 16,000, one backend), for an open-loop request list.
func openCfg(reqs []workload.TraceRequest) Config {
	p := engine.HalfProfile()
	p.KVTokens = 100_000
	return Config{
		Regions: []Region{{"r", 1}}, Latency: [][]time.Duration{{0}},
		Backends: []BackendSpec{
			{Name: "s0", Workers: 1, Profile: p, Pool: 0},
			{Name: "s1", Workers: 1, Profile: p, Pool: 0},
			{Name: "l0", Workers: 1, Profile: p, Pool: 1},
		},
		Pools:   []Pool{{"short", 4000}, {"long", 16000}},
		Gateway: gateway.DefaultConfig(), Policy: "least-request", Params: policy.DefaultParams(),
		Workload: workload.DefaultConfig(), Client: client.DefaultConfig(),
		Seed: 1, Warmup: 10 * time.Second, Measure: 30 * time.Second, KeepRecords: true,
		Requests: reqs, BlockSize: 512,
	}
}

// poissonRequests draws n-token-ish requests at rate per second for d.
func poissonRequests(rate float64, d time.Duration, seed uint64, maxTotal int) []workload.TraceRequest {
	s := workload.Synthetic{CDF: workload.CDF{{float64(maxTotal) / 4, 0.6}, {float64(maxTotal), 1}}, InputShare: 0.8,
		Mix: workload.DefaultMix(), Rate: rate, Burstiness: 1}
	reqs, _ := s.Generate(d, rand.New(rand.NewPCG(seed, 0)))
	return reqs
}

func TestOpenLoopCountsEveryArrivalInTheWindow(t *testing.T) {
	reqs := poissonRequests(4, 60*time.Second, 1, 12000)
	cfg := openCfg(reqs)
	res := run(t, cfg)
	want := 0
	for _, r := range reqs {
		if r.Arrival >= cfg.Warmup && r.Arrival < cfg.Warmup+cfg.Measure {
			want++
		}
	}
	s := res.Summary
	if s.Turns != want || s.Started != want || len(res.Records) != want {
		t.Errorf("measured %d turns (%d started, %d records), want the %d that arrived in the window", s.Turns, s.Started, len(res.Records), want)
	}
	if res.Open == nil || res.Open.EndS < (cfg.Warmup+cfg.Measure).Seconds() {
		t.Fatalf("open result %+v: the run must drain past the window", res.Open)
	}
	for _, r := range res.Records {
		if r.Start < cfg.Warmup || r.Start >= cfg.Warmup+cfg.Measure {
			t.Fatalf("a turn started at %v is outside the window", r.Start)
		}
	}
	if s.Completed+s.Failures != s.Turns || s.Completed == 0 {
		t.Errorf("summary does not add up: %+v", s)
	}
}

func TestPoolsRouteByLengthAndRejectTooLong(t *testing.T) {
	reqs := []workload.TraceRequest{
		{Arrival: 11 * time.Second, InputTokens: 3000, OutputTokens: 500},   // short pool
		{Arrival: 12 * time.Second, InputTokens: 3500, OutputTokens: 501},   // 4,001: long pool
		{Arrival: 13 * time.Second, InputTokens: 15000, OutputTokens: 1000}, // 16,000: long pool
		{Arrival: 14 * time.Second, InputTokens: 16000, OutputTokens: 1},    // too long for every pool
	}
	res := run(t, openCfg(reqs))
	wantPool := []int{0, 1, 1, -1}
	if len(res.Records) != 4 {
		t.Fatalf("%d records, want 4", len(res.Records))
	}
	for _, r := range res.Records {
		i := int(r.Session) - 1
		switch want := wantPool[i]; {
		case want < 0:
			if r.Completed || r.Reason != "too_long" || r.Attempts != 1 || r.Backend != -1 {
				t.Errorf("request %d: %+v, want failed at once as too_long, no backend, no retry", i, r)
			}
		case !r.Completed:
			t.Errorf("request %d failed: %+v", i, r)
		case (r.Backend == 2) != (want == 1):
			t.Errorf("request %d went to backend %d, want pool %d", i, r.Backend, want)
		}
	}
	if res.Summary.SLOPct != 75 {
		t.Errorf("SLO %% = %v, want 75: the rejected request counts in the denominator", res.Summary.SLOPct)
	}
}

// TestTraceBlockReuse: requests that share prefix blocks reuse them in the
// engine's block cache; the same requests without block ids reuse nothing.
func TestTraceBlockReuse(t *testing.T) {
	var reqs []workload.TraceRequest
	for i := range 60 {
		// Ten documents of four blocks shared, then one block of its own.
		doc := uint64(i % 10)
		hashes := []uint64{doc*100 + 1, doc*100 + 2, doc*100 + 3, doc*100 + 4, uint64(10_000 + i)}
		reqs = append(reqs, workload.TraceRequest{Arrival: time.Duration(i) * 500 * time.Millisecond,
			InputTokens: 4*512 + 100, OutputTokens: 20, BlockHashes: hashes})
	}
	cfg := openCfg(reqs)
	cfg.Pools = nil
	for i := range cfg.Backends {
		cfg.Backends[i].Pool = 0
	}
	cfg.Warmup, cfg.Measure = 0, 30*time.Second
	for _, pol := range []string{"least-request", "pulsar-waw"} {
		cfg.Policy = pol
		withBlocks := run(t, cfg)
		// Each document's first request misses (10 of 60); with affinity
		// routing every later one hits its four blocks.
		if pol == "pulsar-waw" {
			want := 100 * float64(50*4*512) / float64(60*(4*512+100))
			if got := withBlocks.Summary.ReusePct; got < want-0.01 || got > want+0.01 {
				t.Errorf("%s: reuse %.2f%%, want %.2f%%", pol, got, want)
			}
		} else if withBlocks.Summary.ReusePct < 30 {
			t.Errorf("%s: reuse %.2f%%, want some", pol, withBlocks.Summary.ReusePct)
		}
	}
	plain := make([]workload.TraceRequest, len(reqs))
	for i, r := range reqs {
		r.BlockHashes = nil
		plain[i] = r
	}
	cfg.Requests = plain
	if got := run(t, cfg).Summary.ReusePct; got != 0 {
		t.Errorf("without block ids reuse is %.2f%%, want 0", got)
	}
}

func TestOpenLoopDeterministicAndWarmupRemoved(t *testing.T) {
	reqs := poissonRequests(6, 40*time.Second, 2, 8000)
	cfg := openCfg(reqs)
	a, _ := json.Marshal(run(t, cfg))
	b, _ := json.Marshal(run(t, cfg))
	if !bytes.Equal(a, b) {
		t.Fatal("same requests and seed gave different results")
	}
	// A burst in the warm-up that is over before the window, then three
	// small requests in it: the engine figures leave the burst out.
	var burst []workload.TraceRequest
	for i := range 20 {
		burst = append(burst, workload.TraceRequest{Arrival: time.Duration(i) * 100 * time.Millisecond, InputTokens: 3000, OutputTokens: 300})
	}
	for _, at := range []time.Duration{31, 35, 40} {
		burst = append(burst, workload.TraceRequest{Arrival: at * time.Second, InputTokens: 100, OutputTokens: 10})
	}
	cfg = openCfg(burst)
	cfg.Warmup, cfg.Measure = 30*time.Second, 15*time.Second
	res := run(t, cfg)
	if res.Summary.Turns != 3 {
		t.Errorf("%d turns measured, want 3", res.Summary.Turns)
	}
	for _, be := range res.Backends {
		if be.BusyPct > 5 {
			t.Errorf("%s busy %.1f%% in the measured part, want the warm-up's burst left out", be.Name, be.BusyPct)
		}
	}
	cfg.Warmup = 0
	cfg.Measure = 45 * time.Second
	if busy := run(t, cfg).Backends[0].BusyPct; busy < 10 {
		t.Errorf("with no warm-up the burst shows: busy %.1f%%, want well above the window's", busy)
	}
}

func TestValidateOpenLoop(t *testing.T) {
	reg := policy.NewRegistry()
	for name, mutate := range map[string]func(*Config){
		"backwards":         func(c *Config) { c.Requests[1].Arrival = 0 },
		"no input":          func(c *Config) { c.Requests[0].InputTokens = 0 },
		"hash count":        func(c *Config) { c.Requests[0].BlockHashes = []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9} },
		"empty pool":        func(c *Config) { c.Backends[2].Pool = 0 },
		"pool out of range": func(c *Config) { c.Backends[2].Pool = 5 },
	} {
		reqs := []workload.TraceRequest{{Arrival: time.Second, InputTokens: 1000, OutputTokens: 1, BlockHashes: []uint64{1, 2}},
			{Arrival: 2 * time.Second, InputTokens: 10, OutputTokens: 1}}
		cfg := openCfg(reqs)
		mutate(&cfg)
		if err := cfg.Validate(reg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
