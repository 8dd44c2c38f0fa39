package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	rcore "github.com/stargate-llm/stargate/router"
)

// detection is one live failover: how long after the kill the router marked
// the killed backend Failed, and how often, over the watch before the
// kill, it had the healthy backends Failed (a false failure).
type detection struct {
	detect      time.Duration
	falseFailed int
}

// measureDetection starts the small fleet with the given heartbeat TTL and
// interval, watches the healthy fleet for watch, kills local-1 and times
// the router's Failed mark.
func measureDetection(t *testing.T, ttl, interval, watch time.Duration) detection {
	t.Helper()
	reg := policy.NewRegistry()
	fl, _ := config.Preset("small")
	fl.Gateway.HeartbeatInterval = interval
	cfg, err := fl.SimConfig(config.Run{Policy: "round-robin", RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := Start(ctx, cfg, reg, Options{Seed: 1, HeartbeatTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	r := f.Routers[0]
	var d detection
	for end := time.Now().Add(watch); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		for _, b := range r.Backends() {
			if b.State == "failed" {
				d.falseFailed++
			}
		}
	}
	if err := f.KillBackend(1); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for deadline := killed.Add(10 * time.Second); d.detect == 0; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("TTL %v: the router did not fail the killed backend within 10 s", ttl)
		}
		if backendByName(t, r, "local-1").State == "failed" {
			d.detect = time.Since(killed)
		}
	}
	// A dead backend sends nothing more: it stays Failed.
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if st := backendByName(t, r, "local-1").State; st != "failed" {
			t.Fatalf("TTL %v: the killed backend went back to %s after it was Failed", ttl, st)
		}
	}
	return d
}

// TestLiveDetectionTTL kills a backend of a live fleet under three liveness
// settings: ours (TTL 1.5 s, heartbeats every 500 ms), the Solyx AI Grid
// paper's (TTL 500 ms, heartbeats every 500 ms) and the Solyx AI Grid paper's TTL with
// heartbeats every 250 ms. Under each the router fails the killed backend
// and keeps it Failed. How soon is the figure, logged for docs/solyx.md
// (go test -v -count=5 -run TestLiveDetectionTTL ./serve/fleet/), not a
// bound this test checks: on a loaded machine a heartbeat may come late
// before the kill, and then the router fails the backend sooner.
func TestLiveDetectionTTL(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ttl, interval time.Duration
	}{
		{"ours", rcore.DefaultLiveHeartbeatTTL, 500 * time.Millisecond},
		{"solyx", 500 * time.Millisecond, 500 * time.Millisecond},
		{"solyx-ttl-250ms-heartbeat", 500 * time.Millisecond, 250 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := measureDetection(t, tc.ttl, tc.interval, 2*time.Second)
			t.Logf("ttl %v interval %v: detected %v after the kill; healthy backends seen Failed %d times in 2 s", tc.ttl, tc.interval, d.detect.Round(time.Millisecond), d.falseFailed)
		})
	}
}
