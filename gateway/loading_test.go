package gateway

import (
	"errors"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

func stateOf(st *Stats) telemetry.State {
	if st.Signals == nil {
		return 0
	}
	return st.Signals.State
}

// TestLoadingLifecycle: each way an engine can be not serving makes the
// backend Loading; coming back it stays Loading for the warm-up, and the
// stats that say Ready go out when the warm-up ends.
func TestLoadingLifecycle(t *testing.T) {
	serving := EngineProbe{Reachable: true, Healthy: true, ModelsListed: true}
	for _, tc := range []struct {
		name string
		down EngineProbe
	}{
		{"engine unreachable", EngineProbe{}},
		{"health failing", EngineProbe{Reachable: true, ModelsListed: true}},
		{"no model listed", EngineProbe{Reachable: true, Healthy: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const warm = 2 * time.Second
			g := newGW(t, 1, func(c *Config) { c.WarmUp = warm })
			g.SetSignals(0, &telemetry.Signals{State: telemetry.Ready, Running: 2})
			g.ObserveEngine(0, serving, nil)
			if g.Loading(0) {
				t.Fatal("an engine serving at the first look is Loading; want Ready at once")
			}
			if st := g.TakeStats(0); stateOf(st) != telemetry.Ready {
				t.Fatalf("first stats: state %v, want Ready", stateOf(st))
			}
			if tc.down.Reachable {
				// One look at a busy engine is not a restart: Ready still.
				g.ObserveEngine(500*time.Millisecond, tc.down, nil)
				if g.Loading(500 * time.Millisecond) {
					t.Fatalf("one look at a reachable engine not serving: Loading; want Ready until %d looks", EngineDownLooks)
				}
				g.ObserveEngine(600*time.Millisecond, serving, nil)
				g.ObserveEngine(700*time.Millisecond, tc.down, nil) // the count starts again
				if g.Loading(700 * time.Millisecond) {
					t.Fatal("looks not in a row made the backend Loading")
				}
			}
			g.ObserveEngine(time.Second, tc.down, nil)
			if !g.Loading(time.Second) || g.NextStatsAt() > time.Second+g.cfg.StatsCoalesce {
				t.Fatalf("engine down: loading %v, next stats at %v; want Loading, sent at once", g.Loading(time.Second), g.NextStatsAt())
			}
			st := g.TakeStats(g.NextStatsAt())
			if stateOf(st) != telemetry.Loading || st.Signals.Running != 2 {
				t.Fatalf("engine down: stats %+v, want Loading with the last report", st.Signals)
			}
			if d, err := g.Offer(1100*time.Millisecond, Request{ID: 1}); d != Reject || !errors.Is(err, ErrOverloaded) {
				t.Fatalf("offer to an engine not serving: %v %v, want an overload rejection", d, err)
			}
			back := 5 * time.Second
			g.ObserveEngine(back, serving, nil)
			if !g.Loading(back) || !g.Loading(back+warm-time.Millisecond) || g.Loading(back+warm) {
				t.Fatalf("engine back at %v: loading at %v/%v/%v, want true, true, false",
					back, g.Loading(back), g.Loading(back+warm-time.Millisecond), g.Loading(back+warm))
			}
			if until := g.WarmingUntil(back); until != back+warm {
				t.Errorf("warming until %v, want %v", until, back+warm)
			}
			if d, _ := g.Offer(back, Request{ID: 2}); d != Admit {
				t.Errorf("offer during the warm-up: %v, want Admit (the engine serves; routers just do not send)", d)
			}
			// Heartbeats during the warm-up say Loading; one goes out at its end.
			for now := back; now < back+warm; now = g.NextStatsAt() {
				if st := g.TakeStats(now); stateOf(st) != telemetry.Loading {
					t.Fatalf("stats at %v during the warm-up: %v, want Loading", now, stateOf(st))
				}
			}
			if at := g.NextStatsAt(); at != back+warm {
				t.Fatalf("next stats at %v, want the warm-up's end %v", at, back+warm)
			}
			if st := g.TakeStats(back + warm); stateOf(st) != telemetry.Ready {
				t.Fatalf("stats at the warm-up's end: %v, want Ready", stateOf(st))
			}
			if at := g.NextStatsAt(); at != back+warm+g.cfg.HeartbeatInterval {
				t.Errorf("after the warm-up the next stats are at %v, want one heartbeat later", at)
			}
		})
	}
}

// TestLoadingHoldsTheQueue: requests queued while the engine does not
// serve wait (a freed slot admits none of them) and are admitted when it
// serves again.
func TestLoadingHoldsTheQueue(t *testing.T) {
	g := newGW(t, 1, func(c *Config) { c.SlotsPerWorker = 1; c.MaxEstimatedWait = time.Hour; c.WarmUp = 0 })
	if d, _ := g.Offer(0, Request{ID: 1}); d != Admit {
		t.Fatal("first request not admitted")
	}
	if d, _ := g.Offer(0, Request{ID: 2}); d != Queue {
		t.Fatal("second request not queued")
	}
	g.ObserveEngine(time.Second, EngineProbe{Reachable: true}, nil)
	if out := g.Finish(2*time.Second, 1, 10, nil); len(out) != 0 {
		t.Fatalf("a freed slot admitted %v while the engine does not serve", out)
	}
	out := g.ObserveEngine(3*time.Second, EngineProbe{Reachable: true, Healthy: true, ModelsListed: true}, nil)
	if len(out) != 1 || out[0].ID != 2 {
		t.Fatalf("engine serving again admitted %v, want request 2", out)
	}
	if g.Loading(3 * time.Second) {
		t.Error("warm-up 0: Loading after the engine serves")
	}
}

// TestNeverProbedIsReady: a gateway whose caller never looks at its engine
// (the simulator) is Ready throughout.
func TestNeverProbedIsReady(t *testing.T) {
	g := newGW(t, 1, nil)
	g.SetSignals(0, &telemetry.Signals{State: telemetry.Ready})
	if g.Loading(0) || stateOf(g.TakeStats(0)) != telemetry.Ready {
		t.Fatal("a gateway never told about its engine is Loading")
	}
}

func TestWarmUpValidate(t *testing.T) {
	cfg := DefaultConfig()
	cfg.WarmUp = -time.Second
	if err := cfg.Validate(); err == nil {
		t.Fatal("a negative warm-up passed validation")
	}
}
