package sim_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/golden"
	"github.com/stargate-llm/stargate/internal/slowtest"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/router"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/workload"
)

// goldenCase is one run whose figures TestGoldenRuns pins to the digit.
type goldenCase struct {
	name string
	cfg  func(t *testing.T, reg *policy.Registry) sim.Config
	// slow: run only with the slow tests (internal/slowtest), as CI does;
	// the others cover every arrival mode, slots and faults on their own.
	slow bool
}

// fleetRun builds a short run of a built-in fleet.
func fleetRun(fleet string, run config.Run, edit func(*sim.Config)) func(*testing.T, *policy.Registry) sim.Config {
	return func(t *testing.T, reg *policy.Registry) sim.Config {
		t.Helper()
		f, ok := config.Preset(fleet)
		if !ok {
			t.Fatalf("no built-in fleet %q", fleet)
		}
		if run.Seed == 0 {
			run.Seed = 1
		}
		if run.Warmup == 0 {
			run.Warmup, run.Measure = 60*time.Second, 20*time.Second
		}
		cfg, err := f.SimConfig(run, reg)
		if err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(&cfg)
		}
		return cfg
	}
}

// traceRequests is a seeded synthetic request list with block ids, as a
// trace replay gets them.
func traceRequests(rate float64, d time.Duration, blockSize int) []workload.TraceRequest {
	s := workload.Synthetic{CDF: workload.CDF{{3000, 0.6}, {12000, 1}}, InputShare: 0.8,
		Mix: workload.DefaultMix(), Rate: rate, Burstiness: 1}
	reqs, _ := s.Generate(d, rand.New(rand.NewPCG(5, 0)))
	for i := range reqs {
		n := (reqs[i].InputTokens-1)/blockSize + 1
		reqs[i].BlockHashes = make([]uint64, n)
		for k := range n {
			// Requests share prefixes by their index: ten families.
			reqs[i].BlockHashes[k] = uint64(i%10)<<32 | uint64(k)
			if k > 2 {
				reqs[i].BlockHashes[k] = uint64(i)<<32 | uint64(k)
			}
		}
	}
	return reqs
}

// faultPhase is the hetero fleet with telemetry, liveness and a fault of
// every kind.
func faultPhase(cfg *sim.Config) {
	cfg.Telemetry = sim.DefaultTelemetry()
	cfg.Router = router.Config{HeartbeatTTL: router.DefaultHeartbeatTTL}
	cfg.RecordDispatches = true
	for i := range cfg.Backends {
		cfg.Backends[i].MaxModelLen = 131072
	}
	s := cfg.Warmup + 2*time.Second
	cfg.Faults = []sim.Fault{
		{Kind: sim.FaultKill, Backends: []int{0}, At: s},
		{Kind: sim.FaultHang, Backends: []int{5}, At: s + 2*time.Second},
		{Kind: sim.FaultErrors, Backends: []int{1}, At: s, Until: s + 10*time.Second, Rate: 0.3},
		{Kind: sim.FaultLimit, Backends: []int{4}, At: s, Limit: 6000},
		{Kind: sim.FaultPath, Backends: []int{8, 9}, At: s, RTT: 40 * time.Millisecond, Jitter: 20 * time.Millisecond},
		{Kind: sim.FaultThermal, Backends: []int{12}, At: s, PeakC: 25, Ramp: 8 * time.Second, MinClock: 0.4},
		{Kind: sim.FaultExporter, Backends: []int{13}, At: s, Until: s + 6*time.Second},
		{Kind: sim.FaultBurst, At: s + time.Second, Every: 5 * time.Second, Count: 40},
	}
}

var goldenCases = []goldenCase{
	{"hetero-waw", fleetRun("hetero", config.Run{Policy: "waw", RPS: 450}, nil), false},
	{"hetero-pulsar-waw", fleetRun("hetero", config.Run{Policy: "pulsar-waw", RPS: 450}, nil), false},
	{"hetero-pressure", fleetRun("hetero", config.Run{Policy: "pressure", RPS: 450}, nil), true},
	{"hetero-round-robin", fleetRun("hetero", config.Run{Policy: "round-robin", RPS: 450}, nil), true},
	{"hetero-overload-waw", fleetRun("hetero", config.Run{Policy: "waw", RPS: 1100}, nil), false},
	{"hetero-overload-pulsar-waw", fleetRun("hetero", config.Run{Policy: "pulsar-waw", RPS: 1100}, nil), true},
	{"hetero-overload-round-robin", fleetRun("hetero", config.Run{Policy: "round-robin", RPS: 1100}, nil), true},
	{"hetero-least-request-slots", fleetRun("hetero", config.Run{Policy: "least-request", RPS: 450}, func(c *sim.Config) {
		c.Gateway.SlotsPerWorker = 8 // fewer slots than the engine's sequences: per-worker caps
	}), false},
	{"homo-waw", fleetRun("homo", config.Run{Policy: "waw", RPS: 450}, nil), true},
	{"homo-pulsar-waw", fleetRun("homo", config.Run{Policy: "pulsar-waw", RPS: 450}, nil), true},
	{"hetero-closed-waw", fleetRun("hetero", config.Run{Policy: "waw", Clients: 1500}, nil), false},
	{"hetero-class-pulsar-waw", fleetRun("hetero", config.Run{Policy: "pulsar-waw", RPS: 60, Class: "multiturn"}, nil), false},
	{"hetero-cooldown-round-robin", fleetRun("hetero", config.Run{Policy: "round-robin", RPS: 450, Cooldown: 5 * time.Second}, func(c *sim.Config) {
		c.KeepRecords = true
	}), true},
	{"hetero-trace-pulsar-waw", fleetRun("hetero", config.Run{Policy: "pulsar-waw", RPS: 1}, func(c *sim.Config) {
		c.Requests, c.BlockSize, c.KeepRecords = traceRequests(400, 80*time.Second, 512), 512, true
	}), true},
	{"hetero-trace-pools", fleetRun("hetero", config.Run{Policy: "least-request", RPS: 1}, func(c *sim.Config) {
		c.Requests, c.BlockSize, c.KeepRecords = traceRequests(400, 80*time.Second, 512), 512, true
		c.Pools = []sim.Pool{{Name: "short", MaxTokens: 4000}, {Name: "long", MaxTokens: 16000}}
		for i := range c.Backends {
			c.Backends[i].Pool = i % 2
		}
	}), false},
	{"hetero-faults-pulsar-waw", fleetRun("hetero", config.Run{Policy: "pulsar-waw", RPS: 450}, faultPhase), false},
	{"hetero-faults-pressure", fleetRun("hetero", config.Run{Policy: "pressure", RPS: 450}, faultPhase), true},
	{"hetero-faults-waw", fleetRun("hetero", config.Run{Policy: "waw", RPS: 450}, faultPhase), true},
}

// digest is a hash of v's JSON: long lists pinned without a long file.
func digest(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:12])
}

// TestGoldenRuns pins the figures of runs across policies, fleets, the
// arrival modes (sessions, closed loop, a class's open loop, a trace) and a
// fault phase to the digit: a refactoring of the simulator must leave every
// file byte-identical (go test ./sim -update rewrites them after a
// deliberate change, which the commit then explains).
func TestGoldenRuns(t *testing.T) {
	reg := policy.NewRegistry()
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			if c.slow && !golden.Update() {
				slowtest.Skip(t, "a golden run beside the quick set")
			}
			res, err := sim.Run(context.Background(), c.cfg(t, reg), reg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(struct {
				Summary    any
				Backends   any
				Events     uint64
				Open       any
				Closed     any
				Marks      any
				Routers    string
				Records    string
				Unfinished string
				Dispatches string
			}{res.Summary, res.Backends, res.Events, res.Open, res.Closed, res.Marks,
				digest(t, res.Routers), digest(t, res.Records), digest(t, res.Unfinished), digest(t, res.Dispatches)}, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden.Check(t, filepath.Join("testdata", "golden", c.name+".json"), got)
		})
	}
}
