package gateway

import (
	"errors"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

// TestSetAdmissible: capacity a gateway cannot admit to is gone from its
// stats at once, a backend with none reports Loading and rejects, and
// capacity coming back admits what waits.
func TestSetAdmissible(t *testing.T) {
	g := newGW(t, 2, func(c *Config) { c.SlotsPerWorker = 2; c.MaxEstimatedWait = time.Hour })
	for i := range 5 { // 4 admitted, 1 queued
		if _, err := g.Offer(0, Request{ID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	g.SetSignals(0, &telemetry.Signals{State: telemetry.Ready, Running: 3})
	if out := g.SetAdmissible(time.Millisecond, 1, nil); len(out) != 0 || g.Capacity() != 2 {
		t.Fatalf("one of two workers out: capacity %d, admitted %v; want 2, none", g.Capacity(), out)
	}
	g.SetAdmissible(2*time.Millisecond, 0, nil)
	st := g.TakeStats(3 * time.Millisecond)
	if st.Capacity != 0 || st.Signals == nil || st.Signals.State != telemetry.Loading || st.Signals.Running != 3 {
		t.Fatalf("no admissible worker: stats capacity %d, signals %+v; want 0 and Loading with the last report", st.Capacity, st.Signals)
	}
	if d, err := g.Offer(4*time.Millisecond, Request{ID: 9}); d != Reject || !errors.Is(err, ErrOverloaded) {
		t.Fatalf("offer with no admissible worker: %v %v, want an overload rejection", d, err)
	}
	if g.EstimatedWait() <= 0 {
		t.Error("no admissible worker: the estimated wait (Retry-After) is 0")
	}
	for i := range 4 {
		g.Finish(5*time.Millisecond, uint64(i), 0, nil)
	}
	if out := g.SetAdmissible(6*time.Millisecond, 2, nil); len(out) != 1 || out[0].ID != 4 || g.Capacity() != 4 {
		t.Fatalf("workers back: admitted %v, capacity %d; want request 4 and 4", out, g.Capacity())
	}
	if st := g.TakeStats(7 * time.Millisecond); st.Signals.State != telemetry.Ready {
		t.Errorf("workers back: state %v, want ready", st.Signals.State)
	}
}

// TestTTFTFloor: a stalled queue raises the reported TTFT p95 to the age of
// the oldest request without a first token, where the engine's histogram
// has nothing new to say.
func TestTTFTFloor(t *testing.T) {
	g := newGW(t, 1, func(c *Config) { c.SlotsPerWorker = 1; c.MaxEstimatedWait = time.Hour })
	report := func(now time.Duration, p95 time.Duration) time.Duration {
		g.SetSignals(now, &telemetry.Signals{TTFTP95: p95})
		return g.TakeStats(now).Signals.TTFTP95
	}
	if got := report(0, 0); got != 0 {
		t.Fatalf("idle: TTFT %v, want 0", got)
	}
	_, _ = g.Offer(time.Second, Request{ID: 1}) // admitted, sent, no first token
	g.AwaitFirstToken(time.Second, 1)
	_, _ = g.Offer(2*time.Second, Request{ID: 2}) // queued
	if got := report(5*time.Second, 0); got != 4*time.Second {
		t.Errorf("engine stalled 4 s on request 1: TTFT %v, want 4s", got)
	}
	if got := report(5*time.Second, 9*time.Second); got != 9*time.Second {
		t.Errorf("a measured p95 above the floor: %v, want it kept (9s)", got)
	}
	g.FirstToken(1)
	if got := report(5*time.Second, 0); got != 3*time.Second {
		t.Errorf("request 1 answered, request 2 queued 3 s: TTFT %v, want 3s", got)
	}
	g.Finish(6*time.Second, 1, 0, nil) // admits 2
	if got := report(6*time.Second, 0); got != 0 {
		t.Errorf("nothing waits and request 2 not marked: TTFT %v, want 0", got)
	}
}
