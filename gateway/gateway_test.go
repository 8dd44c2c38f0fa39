package gateway

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/telemetry"
)

func newGW(t *testing.T, workers int, mutate func(*Config)) *Gateway {
	t.Helper()
	cfg := DefaultConfig()
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := New(0, workers, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestAdmitQueueReject(t *testing.T) {
	// One worker, 2 slots, at most 2 x 2 = 4 waiting, long wait bound.
	g := newGW(t, 1, func(c *Config) { c.SlotsPerWorker = 2; c.MaxWaitingFactor = 2; c.MaxEstimatedWait = time.Hour })
	want := []Decision{Admit, Admit, Queue, Queue, Queue, Queue, Reject}
	for i, w := range want {
		d, err := g.Offer(0, Request{ID: uint64(i), PromptTokens: 10})
		if d != w {
			t.Fatalf("offer %d: %v, want %v", i, d, w)
		}
		if (d == Reject) != errors.Is(err, ErrOverloaded) {
			t.Fatalf("offer %d: decision %v with error %v", i, d, err)
		}
	}
	// Finishing one admits the head of the queue.
	admitted := g.Finish(time.Second, 0, 10, nil)
	if len(admitted) != 1 || admitted[0].ID != 2 {
		t.Fatalf("Finish admitted %+v, want request 2", admitted)
	}
	// Cancelling an active request admits the next; cancelling a queued one does not.
	wasActive, admitted := g.Cancel(time.Second, 1, nil)
	if !wasActive || len(admitted) != 1 || admitted[0].ID != 3 {
		t.Fatalf("Cancel(active) = %v %+v, want true and request 3", wasActive, admitted)
	}
	wasActive, admitted = g.Cancel(time.Second, 5, nil)
	if wasActive || len(admitted) != 0 || g.Waiting() != 1 {
		t.Fatalf("Cancel(queued) = %v %+v with %d waiting, want false, none, 1", wasActive, admitted, g.Waiting())
	}
	st := g.TakeStats(time.Second)
	// Accounting closes: received = active + waiting + completed + cancelled + rejected.
	if got := uint64(st.Active+st.Waiting) + st.Completed + st.Cancelled + st.Rejected; got != st.Received[0] {
		t.Errorf("accounting: %d active+waiting+completed+cancelled+rejected, %d received", got, st.Received[0])
	}
}

func TestQueueMismatchRejection(t *testing.T) {
	// 1 worker x 4 slots, service time 2 s: each waiter adds 0.5 s of estimated wait.
	g := newGW(t, 1, func(c *Config) { c.SlotsPerWorker = 4; c.MaxEstimatedWait = 2 * time.Second })
	for i := range 4 {
		if d, _ := g.Offer(0, Request{ID: uint64(i)}); d != Admit {
			t.Fatalf("request %d not admitted", i)
		}
	}
	tests := []struct {
		waiting int
		want    time.Duration
	}{{0, 500 * time.Millisecond}, {1, time.Second}, {3, 2 * time.Second}}
	for _, tt := range tests {
		for g.Waiting() < tt.waiting {
			if _, err := g.Offer(0, Request{ID: uint64(100 + g.Waiting())}); err != nil {
				t.Fatal(err)
			}
		}
		if got := g.EstimatedWait(); got != tt.want {
			t.Errorf("with %d waiting: estimated wait %v, want %v", tt.waiting, got, tt.want)
		}
	}
	// (3+1) x 2 s / 4 = 2 s is still within the bound; (4+1) x 2 s / 4 = 2.5 s is not.
	if d, err := g.Offer(0, Request{ID: 998}); d != Queue {
		t.Errorf("offer at the wait bound: %v %v, want Queue", d, err)
	}
	if d, err := g.Offer(0, Request{ID: 999}); d != Reject || !errors.Is(err, ErrOverloaded) {
		t.Errorf("offer past the wait bound: %v %v, want Reject with ErrOverloaded", d, err)
	}
}

func TestServiceTimeEWMA(t *testing.T) {
	g := newGW(t, 1, nil)
	if _, err := g.Offer(0, Request{ID: 1}); err != nil {
		t.Fatal(err)
	}
	g.Finish(12*time.Second, 1, 100, nil)
	// 2 + 0.1 x (12 - 2) = 3 s.
	if math.Abs(g.meanService-3) > 1e-9 {
		t.Errorf("mean service = %v s, want 3", g.meanService)
	}
}

func TestInputTPSWindows(t *testing.T) {
	for _, tt := range []struct {
		name     string
		halfLife time.Duration
	}{
		{"peak kept", 0},
		{"peak decays", 120 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newGW(t, 1, func(c *Config) { c.SlotsPerWorker = 1000; c.TPSMinRequests = 10; c.TPSPeakHalfLife = tt.halfLife })
			// 100 requests of 1000 tokens, 10 per second for 10 s: 10,000 tokens/s.
			for i := range 100 {
				now := time.Duration(i) * 100 * time.Millisecond
				if _, err := g.Offer(now, Request{ID: uint64(i)}); err != nil {
					t.Fatal(err)
				}
				g.Finish(now, uint64(i), 1000, nil)
			}
			st := g.TakeStats(10 * time.Second)
			// The 5 s window holds the complete buckets of [5 s, 10 s): 50 requests.
			if math.Abs(st.InputTPS-10_000) > 1e-6 {
				t.Errorf("InputTPS = %v, want 10000", st.InputTPS)
			}
			// Quiet for 30 s: the 5 s and 20 s windows are empty, the 60 s window
			// holds all 100 requests over the 40 s elapsed so far.
			st = g.TakeStats(40 * time.Second)
			if want := 100_000.0 / 40; math.Abs(st.InputTPS-want) > 1e-6 {
				t.Errorf("InputTPS after 30 s quiet = %v, want %v", st.InputTPS, want)
			}
			// The peak: the first window to count (1.25 s, five complete buckets)
			// held 13 requests, 10,400 tokens/s; no later window beat it. With a
			// half-life it has decayed for between 30 and 40 s since.
			lo, hi := 10_400.0, 10_400.0
			if tt.halfLife > 0 {
				lo, hi = 10_000*math.Exp2(-40.0/120), 10_400*math.Exp2(-30.0/120)
			}
			if st.PeakInputTPS < lo-1e-6 || st.PeakInputTPS > hi+1e-6 {
				t.Errorf("PeakInputTPS = %v, want within [%v, %v]", st.PeakInputTPS, lo, hi)
			}
			// After more than 60 s nothing is left in the windows.
			if st = g.TakeStats(200 * time.Second); st.InputTPS != 0 {
				t.Errorf("InputTPS after 160 s quiet = %v, want 0", st.InputTPS)
			}
		})
	}
}

// TestMaxInputTPSPerSlot: the maximum input TPS is the fallback window's input
// tokens per engine-slot second times the slots, whatever share of the slots
// the load fills, and it is 0 until the window holds enough requests.
func TestMaxInputTPSPerSlot(t *testing.T) {
	for _, tt := range []struct {
		name    string
		service time.Duration
		want    float64
	}{
		// 1,000 tokens in 2 s of a slot: 500 per slot second, 4 slots.
		{"2 s each", 2 * time.Second, 2_000},
		{"4 s each", 4 * time.Second, 1_000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := newGW(t, 1, func(c *Config) { c.SlotsPerWorker = 4; c.TPSMinRequests = 10 })
			id := uint64(0)
			// One request at a time, so one slot of four is busy: the measured
			// rate is a quarter of what four busy slots would take.
			for now := time.Duration(0); now < 60*time.Second; now += tt.service {
				if _, err := g.Offer(now, Request{ID: id}); err != nil {
					t.Fatal(err)
				}
				g.Finish(now+tt.service, id, 1000, nil)
				id++
				if id == 9 {
					if st := g.TakeStats(now + tt.service); st.MaxInputTPS != 0 {
						t.Fatalf("MaxInputTPS after 9 requests = %v, want 0 (too few to count)", st.MaxInputTPS)
					}
				}
			}
			st := g.TakeStats(61 * time.Second)
			if math.Abs(st.MaxInputTPS-tt.want) > 1e-6 {
				t.Errorf("MaxInputTPS = %v, want %v", st.MaxInputTPS, tt.want)
			}
			if st.InputTPS >= st.MaxInputTPS {
				t.Errorf("InputTPS %v not below MaxInputTPS %v with one slot of four busy", st.InputTPS, st.MaxInputTPS)
			}
		})
	}
}

// TestInputTPSSteadyRate: a steady stream reads the same rate whatever the
// phase inside a bucket, since windows hold complete buckets only.
func TestInputTPSSteadyRate(t *testing.T) {
	g := newGW(t, 1, func(c *Config) { c.SlotsPerWorker = 1000; c.TPSMinRequests = 10 })
	// One request of 500 tokens every 125 ms: 4,000 tokens/s, two per bucket.
	for i := range 800 {
		now := time.Duration(i) * 125 * time.Millisecond
		if _, err := g.Offer(now, Request{ID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
		g.Finish(now, uint64(i), 500, nil)
		if now > 61*time.Second {
			if r, _ := g.tps.rate(now + 60*time.Millisecond); math.Abs(r-4000) > 1e-6 {
				t.Fatalf("at %v: rate %v, want 4000", now, r)
			}
		}
	}
}

func TestStatsCoalescing(t *testing.T) {
	g := newGW(t, 1, nil)
	if at := g.NextStatsAt(); at != 0 {
		t.Fatalf("first stats due at %v, want 0", at)
	}
	g.TakeStats(0)
	if at := g.NextStatsAt(); at != 500*time.Millisecond {
		t.Errorf("idle: next stats at %v, want the 500 ms heartbeat", at)
	}
	if _, err := g.Offer(3*time.Millisecond, Request{ID: 1}); err != nil {
		t.Fatal(err)
	}
	if at := g.NextStatsAt(); at != 10*time.Millisecond {
		t.Errorf("change at 3 ms: next stats at %v, want 10 ms (coalesced)", at)
	}
	g.TakeStats(10 * time.Millisecond)
	if _, err := g.Offer(50*time.Millisecond, Request{ID: 2}); err != nil {
		t.Fatal(err)
	}
	if at := g.NextStatsAt(); at != 50*time.Millisecond {
		t.Errorf("change at 50 ms after a quiet spell: next stats at %v, want 50 ms", at)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := DefaultConfig()
	bad.SlotsPerWorker, bad.MaxEstimatedWait = 0, 0
	if err := bad.Validate(); err == nil {
		t.Error("invalid config accepted")
	}
	if _, err := New(0, 0, DefaultConfig()); err == nil {
		t.Error("zero workers accepted")
	}
}

// TestLearnLimit: a limit the engine's refusal proved lowers the reports'
// MaxModelLen at once and makes the next stats message due soon, not at the
// heartbeat; a higher or repeated limit is no news, and it lapses after
// the rule's TTL.
func TestLearnLimit(t *testing.T) {
	g := newGW(t, 1, nil)
	g.SetSignals(0, &telemetry.Signals{MaxModelLen: 131072})
	g.TakeStats(0)
	if !g.LearnLimit(100*time.Millisecond, LimitEvidence{Limit: 16384, Requested: 20000}, 20000) {
		t.Fatal("a first limit is news")
	}
	if at := g.NextStatsAt(); at != 100*time.Millisecond {
		t.Errorf("next stats at %v, want 100 ms (the change), not the heartbeat", at)
	}
	if st := g.TakeStats(100 * time.Millisecond); st.Signals == nil || st.Signals.MaxModelLen != 16384 {
		t.Fatalf("stats carry %+v, want max_model_len 16384", st.Signals)
	}
	for _, l := range []int{16384, 20000, 0, -1} {
		if g.LearnLimit(200*time.Millisecond, LimitEvidence{Limit: l, Requested: 30000}, 30000) {
			t.Errorf("limit %d after 16384 was news", l)
		}
	}
	// Later reports keep the learned limit; a lower advertised one wins.
	g.SetSignals(300*time.Millisecond, &telemetry.Signals{MaxModelLen: 131072})
	if st := g.TakeStats(300 * time.Millisecond); st.Signals.MaxModelLen != 16384 || g.Learned(300*time.Millisecond) != 16384 {
		t.Errorf("next report: max_model_len %d, learned %d; want 16384", st.Signals.MaxModelLen, g.Learned(300*time.Millisecond))
	}
	g.SetSignals(400*time.Millisecond, &telemetry.Signals{MaxModelLen: 8192})
	if st := g.TakeStats(400 * time.Millisecond); st.Signals.MaxModelLen != 8192 {
		t.Errorf("advertised 8192 below the learned 16384: reported %d", st.Signals.MaxModelLen)
	}
	// Once the TTL passes with no refusal naming it again, it lapses.
	later := 400*time.Millisecond + DefaultLimitConfig().TTL + time.Second
	g.SetSignals(later, &telemetry.Signals{MaxModelLen: 131072})
	if st := g.TakeStats(later); st.Signals.MaxModelLen != 131072 || g.Learned(later) != 0 {
		t.Errorf("after the TTL: reported %d, learned %d; want the advertised 131072", st.Signals.MaxModelLen, g.Learned(later))
	}
}

// TestTakeStatsIntoMatchesTakeStats: a message written over an old one (of
// another gateway, with other counts and more routers) is the message
// TakeStats builds, field for field, and reuses the old one's memory.
func TestTakeStatsIntoMatchesTakeStats(t *testing.T) {
	fresh, reused := newGW(t, 2, nil), newGW(t, 2, nil)
	other := newGW(t, 1, nil)
	for i := range 20 {
		if _, err := other.Offer(0, Request{ID: uint64(i), Router: i % 5}); err != nil {
			t.Fatal(err)
		}
	}
	old := other.TakeStats(0)
	for _, g := range []*Gateway{fresh, reused} {
		for i := range 7 {
			if _, err := g.Offer(time.Duration(i)*time.Millisecond, Request{ID: uint64(i), Router: i % 3}); err != nil {
				t.Fatal(err)
			}
		}
		g.Finish(10*time.Millisecond, 2, 100, nil)
	}
	want := fresh.TakeStats(20 * time.Millisecond)
	got := reused.TakeStatsInto(20*time.Millisecond, old)
	if got != old {
		t.Errorf("TakeStatsInto allocated a message instead of reusing the one it was given")
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TakeStatsInto = %+v, want %+v", got, want)
	}
	if got := reused.TakeStatsInto(30*time.Millisecond, nil); got.Seq != want.Seq+1 {
		t.Errorf("TakeStatsInto(nil) Seq %d, want %d", got.Seq, want.Seq+1)
	}
}
