package router

import (
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

func newRouterWith(t *testing.T, pol string, n int, cfg Config) *Router {
	t.Helper()
	bs := make([]policy.Backend, n)
	rb := make([]Backend, n)
	for i := range bs {
		name := string(rune('a' + i))
		bs[i] = policy.Backend{Name: name, Key: policy.KeyOf(name)}
		rb[i] = Backend{Name: name, Capacity: 100}
	}
	p, err := policy.NewRegistry().New(pol, policy.DefaultParams(), bs, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewWith(0, p, rb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// beat delivers a stats message from backend b at now.
func beat(r *Router, now time.Duration, b int, seq uint64, sig *telemetry.Signals) {
	r.OnStats(now, &gateway.Stats{Backend: b, Seq: seq, Capacity: 100, Signals: sig}, nil)
}

// TestFailedWithinTTLAndNeverPicked: a backend that stops sending is Failed
// as of its last message plus the TTL, and no request goes to it after that,
// under every policy; when it speaks again it is Ready.
func TestFailedWithinTTLAndNeverPicked(t *testing.T) {
	for _, pol := range policy.NewRegistry().Names() {
		t.Run(pol, func(t *testing.T) {
			r := newRouterWith(t, pol, 3, Config{HeartbeatTTL: 750 * ms})
			seq := uint64(0)
			// Everyone beats every 10 ms until 1 s; then backend 1 goes silent.
			now := time.Duration(0)
			id := uint64(0)
			for ; now < 3*time.Second; now += 10 * ms {
				seq++
				for b := range 3 {
					if b != 1 || now <= time.Second {
						beat(r, now, b, seq, nil)
					}
				}
				for range 3 {
					id++
					d := r.route(now, id, id*7919)
					if d.Kind == policy.Wait {
						r.Cancel(id)
					}
					if d.Kind == policy.Dispatch && d.Backend == 1 && now > time.Second+750*ms {
						t.Fatalf("request sent to the failed backend at %v", now)
					}
				}
			}
			st := r.Backends(now)[1]
			if st.State != telemetry.Failed || st.Since != time.Second+750*ms {
				t.Errorf("backend 1: %s since %v, want failed since 1.75s", st.StateName, st.Since)
			}
			if at, ok := r.NextExpiry(); !ok || at != now-10*ms+750*ms {
				t.Errorf("next expiry %v (%v), want the others' last beat + TTL", at, ok)
			}
			seq++
			beat(r, now, 1, seq, nil)
			if st := r.Backends(now)[1]; st.State != telemetry.Ready {
				t.Errorf("after a new message: %s, want ready", st.StateName)
			}
		})
	}
}

// TestDrainFinishesThenTerminates: a drained backend takes no new request,
// becomes Terminated once it holds nothing, and returns on Undrain.
func TestDrainFinishesThenTerminates(t *testing.T) {
	r := newRouterWith(t, "round-robin", 2, Config{HeartbeatTTL: time.Second})
	r.OnStats(0, &gateway.Stats{Backend: 0, Seq: 1, Capacity: 100, Active: 5}, nil)
	if err := r.Drain(0, 0); err != nil {
		t.Fatal(err)
	}
	if st := r.Backends(0)[0]; st.State != telemetry.Draining || !st.Drained {
		t.Fatalf("drained backend with work is %s", st.StateName)
	}
	for i := range 10 {
		if d := r.route(0, uint64(i), uint64(i)); d.Backend != 1 {
			t.Fatalf("request %d went to %d while 0 drains", i, d.Backend)
		}
	}
	r.OnStats(100*ms, &gateway.Stats{Backend: 0, Seq: 2, Capacity: 100, Active: 0}, nil)
	if st := r.Backends(100 * ms)[0]; st.State != telemetry.Terminated {
		t.Errorf("empty drained backend is %s, want terminated", st.StateName)
	}
	if err := r.Undrain(100*ms, 0); err != nil {
		t.Fatal(err)
	}
	if st := r.Backends(100 * ms)[0]; st.State != telemetry.Ready {
		t.Errorf("undrained backend is %s", st.StateName)
	}
	if err := r.Drain(0, 7); err == nil {
		t.Error("drained a backend that does not exist")
	}
	// A backend that reports Loading takes nothing until it reports Ready.
	r.OnStats(200*ms, &gateway.Stats{Backend: 1, Seq: 3, Capacity: 100, Signals: &telemetry.Signals{State: telemetry.Loading}}, nil)
	if d := r.route(200*ms, 100, 100); d.Backend != 0 {
		t.Errorf("request went to %d while 1 is loading", d.Backend)
	}
}

// TestCapabilityLearnedFromErrors: after a context-length refusal, requests
// longer than the learned limit avoid the backend while another fits them;
// shorter ones still go there.
func TestCapabilityLearnedFromErrors(t *testing.T) {
	r := newRouterWith(t, "round-robin", 2, Config{Capability: true})
	r.OnResult(0, 0, Result{Kind: TooLong, Tokens: 20000, Limit: 16384})
	if got := r.Backends(0)[0]; got.MaxModelLen != 16384 || got.LearnedLimit != 16384 || got.ErrorRate != 0 {
		t.Fatalf("after a 400: %+v", got)
	}
	for i := range 10 {
		if d := r.routeTokens(0, uint64(i), uint64(i), 20000); d.Backend != 1 {
			t.Fatalf("long request %d went to backend %d", i, d.Backend)
		}
	}
	short := map[BackendID]int{}
	for i := range 10 {
		short[r.routeTokens(0, uint64(100+i), uint64(i), 1000).Backend]++
	}
	if short[0] == 0 {
		t.Error("short requests no longer reach the limited backend")
	}
	// With every backend too small, the request still goes somewhere.
	r.OnResult(0, 1, Result{Kind: TooLong, Tokens: 9000})
	if got := r.Backends(0)[1].MaxModelLen; got != 8999 {
		t.Errorf("limit learned without a number: %d, want 8999", got)
	}
	if d := r.routeTokens(0, 200, 1, 50000); d.Kind != policy.Dispatch {
		t.Errorf("a request too long for all was %v", d.Kind)
	}
	// Without the option and with a blind policy, nothing is filtered.
	blind := newRouterWith(t, "round-robin", 2, Config{})
	blind.OnResult(0, 0, Result{Kind: TooLong, Tokens: 20000, Limit: 16384})
	seen := map[BackendID]bool{}
	for i := range 4 {
		seen[blind.routeTokens(0, uint64(i), uint64(i), 20000).Backend] = true
	}
	if !seen[0] {
		t.Error("a capability-blind router filtered")
	}
}

func TestErrorRateAndProbes(t *testing.T) {
	r := newRouterWith(t, "round-robin", 2, Config{ErrorHalfLife: time.Second})
	for i := range 20 {
		r.OnResult(time.Duration(i)*ms, 0, Result{Kind: Errored})
		r.OnResult(time.Duration(i)*ms, 1, Result{Kind: Succeeded})
		r.OnResult(time.Duration(i)*ms, 1, Result{Kind: Overloaded})
	}
	st := r.Backends(20 * ms)
	if st[0].ErrorRate < 0.9 || st[1].ErrorRate != 0 {
		t.Errorf("error rates %v and %v", st[0].ErrorRate, st[1].ErrorRate)
	}
	if later := r.Backends(10 * time.Second); later[0].ErrorRate != st[0].ErrorRate {
		// Decay scales errors and requests alike; the rate holds until new outcomes.
		t.Logf("rate after 10 s without traffic: %v", later[0].ErrorRate)
	}
	for i := range 10 {
		r.OnProbe(time.Duration(i)*500*ms, 1, 40*ms)
	}
	if p := r.Views()[1].Path; !p.Known || p.RTT != 40*ms {
		t.Errorf("path %+v", p)
	}
}

// TestLearnedLimitNeedsEvidence (issue 19, observation 4): a refusal naming
// a limit far under the advertised one does not take the backend out; a
// limit the request's own size does not support is ignored.
func TestLearnedLimitNeedsEvidence(t *testing.T) {
	r := newRouterWith(t, "round-robin", 2, Config{Capability: true})
	r.OnStats(0, &gateway.Stats{Backend: 0, Seq: 1, Capacity: 4, Signals: &telemetry.Signals{MaxModelLen: 32768}}, nil)
	r.OnResult(0, 0, Result{Kind: TooLong, Tokens: 40, Limit: 8})
	r.OnResult(0, 0, Result{Kind: TooLong, Tokens: 3000, Limit: 4096})
	if got := r.Backends(0)[0]; got.MaxModelLen != 32768 || got.LearnedLimit != 0 {
		t.Fatalf("after a limit under the floor and one over the request: max_model_len %d learned %d", got.MaxModelLen, got.LearnedLimit)
	}
	r.OnResult(0, 0, Result{Kind: TooLong, Tokens: 5000, Limit: 4096})
	if got := r.Backends(0)[0]; got.MaxModelLen != 4096 {
		t.Fatalf("a consistent refusal: max_model_len %d, want 4096", got.MaxModelLen)
	}
}

// TestLifecycleIsOneCacheLine keeps what a stats message reads of a
// backend's router state in one 64-byte line (see lifecycle).
func TestLifecycleIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(lifecycle{}); n != 64 {
		t.Errorf("lifecycle is %d bytes, want 64 (one cache line)", n)
	}
}
