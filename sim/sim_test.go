package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/client"
	"github.com/stargate-llm/stargate/engine"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/internal/golden"
	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/workload"
)

// small is a two-region fleet of three small backends, loaded hard enough
// that gateways queue and reject.
func small(pol string, rps float64) Config {
	p := engine.HalfProfile()
	p.KVTokens = 200_000
	wl := workload.DefaultConfig()
	wl.TurnsMin, wl.TurnsMax = 2, 6
	return Config{
		Regions:       []Region{{"east", 2}, {"west", 1}},
		Latency:       [][]time.Duration{{time.Millisecond, 30 * time.Millisecond}, {30 * time.Millisecond, time.Millisecond}},
		ClientLatency: time.Millisecond,
		Backends: []BackendSpec{
			{Name: "east-big", Region: 0, Workers: 4, Profile: p},
			{Name: "east-small", Region: 0, Workers: 1, Profile: p},
			{Name: "west", Region: 1, Workers: 2, Profile: p},
		},
		Gateway: gateway.DefaultConfig(), Policy: pol, Params: policy.DefaultParams(),
		Workload: wl, Client: client.DefaultConfig(),
		RPS: rps, Seed: 7, Warmup: 20 * time.Second, Measure: 40 * time.Second,
	}
}

func run(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(context.Background(), cfg, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestDeterministic(t *testing.T) {
	for _, pol := range policy.NewRegistry().Names() {
		t.Run(pol, func(t *testing.T) {
			cfg := small(pol, 30)
			cfg.KeepRecords = true
			a, _ := json.Marshal(run(t, cfg))
			b, _ := json.Marshal(run(t, cfg))
			if !bytes.Equal(a, b) {
				t.Fatal("same config and seed gave different results")
			}
			cfg.Seed++
			c, _ := json.Marshal(run(t, cfg))
			if bytes.Equal(a, c) {
				t.Fatal("a different seed gave the same result")
			}
		})
	}
}

// TestAccountingCloses: every request a gateway received ends as exactly one
// of completed, cancelled or rejected, or is still there at the end; every
// turn that started either ended or is still running.
func TestAccountingCloses(t *testing.T) {
	for _, pol := range []string{"waw", "pulsar-waw", "round-robin"} {
		t.Run(pol, func(t *testing.T) {
			res := run(t, small(pol, 60))
			var rejected, cancelled uint64
			for _, b := range res.Backends {
				sum := b.GatewayCompleted + b.GatewayCancelled + b.GatewayRejected + uint64(b.GatewayActive+b.GatewayWaiting)
				if sum != b.GatewayReceived {
					t.Errorf("%s: received %d, but completed+cancelled+rejected+active+waiting = %d", b.Name, b.GatewayReceived, sum)
				}
				rejected += b.GatewayRejected
				cancelled += b.GatewayCancelled
			}
			s := res.Summary
			if s.Completed+s.Failures != s.Turns || s.Good > s.Completed {
				t.Errorf("summary does not add up: %+v", s)
			}
			if s.Turns == 0 || s.TTFTCounted != s.Completed {
				t.Errorf("summary counts %d turns, %d TTFTs for %d completed", s.Turns, s.TTFTCounted, s.Completed)
			}
			t.Logf("%s: %d turns, %d failures, %d gateway rejections, %d cancellations", pol, s.Turns, s.Failures, rejected, cancelled)
		})
	}
}

func TestOverloadShowsUp(t *testing.T) {
	light, heavy := run(t, small("least-request", 5)), run(t, small("least-request", 200))
	if light.Summary.SLOPct < 99 {
		t.Errorf("light load: SLO %.1f%%, want >= 99%%", light.Summary.SLOPct)
	}
	if heavy.Summary.SLOPct > light.Summary.SLOPct-10 || heavy.Summary.Failures == 0 {
		t.Errorf("heavy load: SLO %.1f%% with %d failures; want clearly worse than light load (%.1f%%)",
			heavy.Summary.SLOPct, heavy.Summary.Failures, light.Summary.SLOPct)
	}
}

func TestGolden(t *testing.T) {
	res := run(t, small("pulsar-waw", 40))
	got, err := json.MarshalIndent(struct {
		Summary  any
		Backends any
		Events   uint64
	}{res.Summary, res.Backends, res.Events}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	golden.Check(t, filepath.Join("testdata", "small.golden.json"), append(got, '\n'))
}

func TestValidateRejectsBadConfig(t *testing.T) {
	reg := policy.NewRegistry()
	tests := []struct {
		name   string
		mutate func(*Config)
	}{
		{"unknown policy", func(c *Config) { c.Policy = "fastest" }},
		{"no backends", func(c *Config) { c.Backends = nil }},
		{"latency matrix too small", func(c *Config) { c.Latency = c.Latency[:1] }},
		{"negative latency", func(c *Config) { c.Latency[0][1] = -time.Millisecond }},
		{"backend in unknown region", func(c *Config) { c.Backends[0].Region = 9 }},
		{"duplicate backend", func(c *Config) { c.Backends[1].Name = c.Backends[0].Name }},
		{"zero workers", func(c *Config) { c.Backends[0].Workers = 0 }},
		{"zero rate", func(c *Config) { c.RPS = 0 }},
		{"negative clients", func(c *Config) { c.Clients = -1 }},
		{"clients and a request list", func(c *Config) {
			c.Clients = 2
			c.Requests = []workload.TraceRequest{{Arrival: time.Second, InputTokens: 10, OutputTokens: 1}}
		}},
		{"no routers", func(c *Config) { c.Regions[0].Routers, c.Regions[1].Routers = 0, 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := small("waw", 10)
			tt.mutate(&cfg)
			if _, err := Run(context.Background(), cfg, reg); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestCancelledContextStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cfg := small("waw", 200)
	cfg.Measure = time.Hour
	if _, err := Run(ctx, cfg, policy.NewRegistry()); err == nil {
		t.Error("a cancelled run returned no error")
	}
}

// TestRunsDoNotChangeResults: planning identical decode steps as runs is an
// optimisation only; stepping one at a time gives the same figures.
func TestRunsDoNotChangeResults(t *testing.T) {
	for _, pol := range []string{"waw", "pulsar-waw", "least-request"} {
		t.Run(pol, func(t *testing.T) {
			cfg := small(pol, 40)
			runs := run(t, cfg)
			cfg.Engine.MaxStepsPerRun = 1
			steps := run(t, cfg)
			runs.Events, steps.Events = 0, 0
			// Time-weighted means add up in another order: equal to 1e-9.
			for _, r := range []*Result{runs, steps} {
				for i := range r.Backends {
					b := &r.Backends[i]
					b.MeanBatch, b.MeanKVFillPct = math.Round(b.MeanBatch*1e9)/1e9, math.Round(b.MeanKVFillPct*1e9)/1e9
				}
			}
			a, _ := json.Marshal(runs)
			b, _ := json.Marshal(steps)
			if !bytes.Equal(a, b) {
				t.Errorf("runs and single steps differ:\nruns  %s\nsteps %s", a, b)
			}
		})
	}
}

// classRun is small's fleet under a workload class's open loop with the
// SLO matrix's windows (30 s + 45 s + 15 s).
func classRun(t *testing.T, pol, class string, rps float64) *Result {
	t.Helper()
	c, err := workload.ClassByName(class)
	if err != nil {
		t.Fatal(err)
	}
	cfg := small(pol, rps)
	cfg.Class = c
	cfg.Warmup, cfg.Measure, cfg.Cooldown = 30*time.Second, 45*time.Second, 15*time.Second
	cfg.KeepRecords = true
	return run(t, cfg)
}

// TestClassOpenLoop: the class's requests arrive at its rate whatever the
// fleet does; the turns that started in the window are all accounted for
// (ended or unfinished); an overloaded fleet leaves turns unfinished.
func TestClassOpenLoop(t *testing.T) {
	for _, tt := range []struct {
		class      string
		rps        float64
		unfinished bool
	}{{"baseline_mixed", 20, false}, {"code_heavy", 20, false}, {"very_long", 20, true}} {
		t.Run(tt.class, func(t *testing.T) {
			res := classRun(t, "least-request", tt.class, tt.rps)
			s := res.Summary
			if s.Started != int(tt.rps*45) {
				t.Errorf("%d turns started in 45 s at %v req/s", s.Started, tt.rps)
			}
			if s.Started != s.Turns+s.Unfinished || len(res.Records) != s.Turns || len(res.Unfinished) != s.Unfinished {
				t.Errorf("started %d != ended %d + unfinished %d (records %d, %d)", s.Started, s.Turns, s.Unfinished,
					len(res.Records), len(res.Unfinished))
			}
			for _, r := range append(res.Records, res.Unfinished...) {
				if r.Start < 30*time.Second || r.Start >= 75*time.Second || r.End > 90*time.Second {
					t.Fatalf("turn outside the window: %+v", r)
				}
			}
			if (s.Unfinished > 0) != tt.unfinished || (!tt.unfinished && s.SLOPct < 99) {
				t.Errorf("%d unfinished, SLO %.1f%%; want unfinished turns: %v", s.Unfinished, s.SLOPct, tt.unfinished)
			}
			if s.ReusePct != 0 {
				t.Errorf("single-request sessions reused %.1f%% of their prompts from cache", s.ReusePct)
			}
		})
	}
}

// TestClassSessionsReuseCache: multiturn's sessions keep their router, so an
// affinity policy finds their earlier turns in cache far more often than
// round-robin; rapid_shift's fresh prompts reuse nothing under any policy.
func TestClassSessionsReuseCache(t *testing.T) {
	pulsar, rr := classRun(t, "pulsar-waw", "multiturn", 4), classRun(t, "round-robin", "multiturn", 4)
	if pulsar.Summary.ReusePct < 60 || rr.Summary.ReusePct > pulsar.Summary.ReusePct-20 {
		t.Errorf("multiturn reuse: pulsar-waw %.1f%%, round-robin %.1f%%", pulsar.Summary.ReusePct, rr.Summary.ReusePct)
	}
	routers := map[uint64]int{}
	for _, r := range pulsar.Records {
		if was, ok := routers[r.Session]; ok && was != r.Router {
			t.Fatalf("session %d moved from router %d to %d", r.Session, was, r.Router)
		}
		routers[r.Session] = r.Router
	}
	if shift := classRun(t, "pulsar-waw", "rapid_shift", 10); shift.Summary.ReusePct != 0 {
		t.Errorf("rapid_shift reused %.1f%%", shift.Summary.ReusePct)
	}
}

func TestClassDeterministic(t *testing.T) {
	a, _ := json.Marshal(classRun(t, "power-of-two", "adversarial_spike", 10))
	b, _ := json.Marshal(classRun(t, "power-of-two", "adversarial_spike", 10))
	if !bytes.Equal(a, b) {
		t.Fatal("same class, config and seed gave different results")
	}
}

// TestConversationTurnsDoNotOverlap: a conversation's turn waits for the one
// before it, even when the fleet is too slow for the class's pace; and the
// class's lead shifts the measured window.
func TestConversationTurnsDoNotOverlap(t *testing.T) {
	res := classRun(t, "round-robin", "multiturn", 12) // far past what small serves
	lead := 70 * time.Second
	byTurn := map[[2]uint64]metrics.TurnRecord{}
	for _, r := range res.Records {
		if r.Start < lead+30*time.Second || r.Start >= lead+75*time.Second {
			t.Fatalf("turn outside the shifted window: %+v", r)
		}
		byTurn[[2]uint64{r.Session, uint64(r.Turn)}] = r
	}
	waited := 0
	for key, r := range byTurn {
		prev, ok := byTurn[[2]uint64{key[0], key[1] - 1}]
		if !ok || key[1] == 0 {
			continue
		}
		if r.Start < prev.End {
			t.Fatalf("session %d: turn %d started at %v, before turn %d ended at %v", key[0], key[1], r.Start, key[1]-1, prev.End)
		}
		if r.Start-prev.Start > 10*time.Second {
			waited++
		}
	}
	if waited == 0 {
		t.Error("no turn waited for the one before it on an overloaded fleet")
	}
}
