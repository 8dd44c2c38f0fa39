package gatewayd

import (
	"net/http"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/serve/engined"
	"github.com/stargate-llm/stargate/telemetry"
)

// stateNow takes a stats message from the gateway's core now, as the stats
// loop would, and returns the state it reports.
func stateNow(g *Server) telemetry.State {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.adm.TakeStats(g.now())
	if st.Signals == nil {
		return 0
	}
	return st.Signals.State
}

// warming reports whether the gateway's engine serves and its warm-up is
// still under way.
func warming(g *Server) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.adm.EngineServing() && g.adm.WarmingUntil(g.now()) > 0
}

// TestEngineRestartLoading: an engine killed mid-stream and restarted, which
// loads its model for a while (health 503, no model listed), keeps its
// backend Loading from the crash through the load and a warm-up after it;
// requests meanwhile end at once with 503 and Retry-After (their router
// places them elsewhere), and once Ready the backend serves again.
func TestEngineRestartLoading(t *testing.T) {
	eng := startEngine(t, "127.0.0.1:0", testKey)
	g, url := startGateway(t, "http://"+eng.addr, func(c *Config) {
		c.ScrapeInterval = 20 * time.Millisecond
		// Long enough that a test goroutine starved on a loaded machine
		// still sees the warm-up under way.
		c.Admission.WarmUp = 3 * time.Second
	})
	poll.Until(t, 5*time.Second, "the first report", func() bool { return stateNow(g) != 0 })
	if g.Loading() || stateNow(g) != telemetry.Ready {
		t.Fatal("a gateway whose engine serves from the start is Loading")
	}
	crashMidStream(t, url, eng)
	poll.Until(t, 5*time.Second, "Loading after the crash", g.Loading)
	if s := stateNow(g); s != telemetry.Loading {
		t.Fatalf("stats after the crash say %v, want Loading", s)
	}

	cfg := engined.DefaultConfig()
	cfg.Key, cfg.LoadTime = testKey, 3*time.Second
	serveEngine(t, eng.addr, cfg) // a new process, loading its model (long: a loaded machine is slow to look)
	poll.Until(t, 5*time.Second, "the new engine's listener", func() bool {
		resp, err := http.Get("http://" + eng.addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return true
	})
	if code, retry := session(t, url, 1); code != http.StatusServiceUnavailable || retry == "" {
		t.Errorf("request while the engine loads: status %d, Retry-After %q; want 503 with Retry-After", code, retry)
	}
	if !g.Loading() {
		t.Error("the backend is Ready while its engine loads")
	}
	poll.Until(t, 10*time.Second, "the warm-up after the engine serves", func() bool { return warming(g) })
	if s := stateNow(g); s != telemetry.Loading {
		t.Errorf("stats during the warm-up say %v, want Loading", s)
	}
	poll.Until(t, 10*time.Second, "Ready after the warm-up", func() bool { return !g.Loading() })
	if s := stateNow(g); s != telemetry.Ready {
		t.Errorf("stats after the warm-up say %v, want Ready", s)
	}
	poll.Until(t, 10*time.Second, "the worker back from quarantine", func() bool { return len(g.Quarantined()) == 0 })
	for i := range 5 {
		if code, _ := session(t, url, 10+i); code != http.StatusOK {
			t.Errorf("session %d after the restart: status %d, want 200", i, code)
		}
	}
}

// TestEngineLoadingAtStart: a gateway started beside an engine still
// loading its model reports Loading until it serves, then through the
// warm-up (the gateway saw the engine not serving), then Ready.
func TestEngineLoadingAtStart(t *testing.T) {
	cfg := engined.DefaultConfig()
	cfg.Key, cfg.LoadTime = testKey, 3*time.Second
	eng := serveEngine(t, "127.0.0.1:0", cfg)
	g, url := startGateway(t, "http://"+eng.addr, func(c *Config) { c.ScrapeInterval = 20 * time.Millisecond })
	if !g.Loading() || stateNow(g) != telemetry.Loading {
		t.Fatal("a gateway started beside a loading engine is not Loading")
	}
	poll.Until(t, 10*time.Second, "Ready once the engine has loaded", func() bool { return !g.Loading() })
	if code, _ := session(t, url, 1); code != http.StatusOK {
		t.Errorf("session after the load: status %d, want 200", code)
	}
}
