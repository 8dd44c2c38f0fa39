package router

import (
	"testing"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/telemetry"
)

// statusOf returns the status of the backend with id, failing if absent.
func statusOf(t *testing.T, r *Router, now time.Duration, id BackendID) BackendStatus {
	t.Helper()
	for _, st := range r.Backends(now) {
		if st.ID == id {
			return st
		}
	}
	t.Fatalf("backend %d is not a member", id)
	return BackendStatus{}
}

// viewOf returns the view of backend id.
func viewOf(t *testing.T, r *Router, id BackendID) policy.View {
	t.Helper()
	for i, v := range r.Views() {
		if r.ID(i) == id {
			return v
		}
	}
	t.Fatalf("backend %d has no view", id)
	return policy.View{}
}

// TestMembershipKeepsState: adding and removing backends keeps every other
// backend's ID, pending count, error rate, drain and learned limit, and the
// policy's per-backend state; IDs are never reused.
func TestMembershipKeepsState(t *testing.T) {
	for _, pol := range []string{"least-request", "waw", "pulsar-waw", "pressure", "round-robin", "random", "power-of-two"} {
		t.Run(pol, func(t *testing.T) {
			r := newRouterWith(t, pol, 3, Config{ErrorHalfLife: time.Hour})
			a, b, c := BackendID(0), BackendID(1), BackendID(2)
			for i := range 6 {
				r.route(0, uint64(i), uint64(i))
			}
			r.OnResult(ms, c, Result{Kind: Errored})
			r.OnResult(ms, c, Result{Kind: TooLong, Tokens: 5000, Limit: 4096})
			if err := r.Drain(ms, c); err != nil {
				t.Fatal(err)
			}
			r.route(ms, 6, 6) // the policy sees c's errors
			before := viewOf(t, r, c)
			var weights []policy.BackendWeight
			if wk, ok := r.Policy().(policy.WeightKeeper); ok {
				weights = wk.LastWeights(nil)
				if weights[2] == weights[1] {
					t.Fatalf("c's weights %+v equal b's: the test cannot tell them apart", weights[2])
				}
			}

			if _, err := r.Remove(2*ms, a, nil); err != nil {
				t.Fatal(err)
			}
			d, _, err := r.Add(3*ms, Backend{Name: "d", Capacity: 100}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d != 3 {
				t.Errorf("new backend got ID %d, want 3 (IDs are never reused)", d)
			}
			if _, _, err := r.Add(3*ms, Backend{Name: "d", Capacity: 100}, nil); err == nil {
				t.Error("a second backend named d was added")
			}
			if id, ok := r.Lookup("c"); !ok || id != c {
				t.Errorf("c is %d %v after membership changes, want %d", id, ok, c)
			}
			if _, ok := r.Lookup("a"); ok {
				t.Error("a is still a member")
			}
			after := viewOf(t, r, c)
			if after.Pending != before.Pending || after.ErrorRate == 0 || after.MaxModelLen != 4096 || after.Eligible {
				t.Errorf("c after churn: pending %d (was %d), error rate %v, limit %d, eligible %v; want its state kept",
					after.Pending, before.Pending, after.ErrorRate, after.MaxModelLen, after.Eligible)
			}
			if st := statusOf(t, r, 3*ms, c); !st.Drained {
				t.Error("c is no longer drained")
			}
			if wk, ok := r.Policy().(policy.WeightKeeper); ok {
				got := wk.LastWeights(nil)
				if len(got) != 3 || got[1] != weights[2] || got[0] != weights[1] {
					t.Errorf("policy weights after churn %+v, want b's and c's kept from %+v", got, weights)
				}
			}
			// The removed ID is unknown everywhere; stats for it are ignored.
			if err := r.Drain(4*ms, a); err == nil {
				t.Error("drained a removed backend")
			}
			r.OnStats(4*ms, &gateway.Stats{Backend: int(a), Seq: 9, Capacity: 1, Active: 1}, nil)
			for i := range 30 {
				dd := r.route(5*ms, uint64(100+i), uint64(i))
				if dd.Kind == policy.Dispatch && dd.Backend != b && dd.Backend != d {
					t.Fatalf("dispatched to %d; members b=%d, d=%d (c drains)", dd.Backend, b, d)
				}
			}
		})
	}
}

// TestRemoveAsksWaitersAgain: a request waiting in the queue of a backend
// that leaves is asked again (here it waits for another, as every backend is
// full) and is released by that backend's free slot; one excluding backends
// by ID is not confused by positions that moved.
func TestRemoveAsksWaitersAgain(t *testing.T) {
	r := newRouter(t, "waw", 3, 1)
	for b := range 3 {
		r.OnStats(0, &gateway.Stats{Backend: b, Seq: 1, Capacity: 1, Active: 1}, nil)
	}
	d := r.route(0, 1, 99)
	if d.Kind != policy.Wait {
		t.Fatalf("all full: %v, want wait", d.Kind)
	}
	if _, err := r.Remove(ms, d.Backend, nil); err != nil {
		t.Fatal(err)
	}
	queued := 0
	for _, v := range r.Views() {
		queued += v.Queued
	}
	if r.Waiting() != 1 || queued != 1 {
		t.Fatalf("after its backend left: %d waiting, %d queued; want 1 and 1", r.Waiting(), queued)
	}
	var out []Outcome
	for i := range 2 {
		out = r.OnStats(2*ms, &gateway.Stats{Backend: int(r.ID(i)), Seq: 2, Capacity: 1}, out)
	}
	if len(out) != 1 || out[0].ID != 1 || out[0].Decision.Kind != policy.Dispatch || out[0].Decision.Backend == d.Backend {
		t.Fatalf("freed slots released %+v, want request 1 dispatched to a member", out)
	}
	// Excluding by ID: the request skips the excluded member (and the
	// removed ID is ignored).
	ex := r.ID(0)
	for i := range 10 {
		r.OnStats(3*ms, &gateway.Stats{Backend: int(r.ID(0)), Seq: uint64(3 + i), Capacity: 4}, nil)
		r.OnStats(3*ms, &gateway.Stats{Backend: int(r.ID(1)), Seq: uint64(3 + i), Capacity: 4}, nil)
		got := r.Route(3*ms, uint64(10+i), Ask{Session: uint64(i), Exclude: []BackendID{ex, d.Backend}})
		if got.Kind == policy.Dispatch && got.Backend == ex {
			t.Fatalf("dispatched to excluded backend %d", ex)
		}
	}
}

// TestRestartedCountsFromZero: a gateway that restarted counts its
// received requests from zero; its next stats apply whatever their Seq.
func TestRestartedCountsFromZero(t *testing.T) {
	r := newRouter(t, "least-request", 2, 10)
	for i := range 4 {
		r.route(0, uint64(i), uint64(i))
	}
	r.OnStats(ms, &gateway.Stats{Backend: 1, Seq: 50, Capacity: 10, Received: []uint64{1}}, nil)
	if err := r.Restarted(1); err != nil {
		t.Fatal(err)
	}
	if v := r.Views()[1]; v.Pending != 0 {
		t.Errorf("pending %d after restart, want 0", v.Pending)
	}
	r.OnStats(2*ms, &gateway.Stats{Backend: 1, Seq: 1, Capacity: 10, Active: 3}, nil)
	if v := r.Views()[1]; v.Active != 3 {
		t.Errorf("first stats after restart ignored: active %d", v.Active)
	}
	if err := r.Restarted(7); err == nil {
		t.Error("restarted an unknown backend")
	}
	if err := r.Advertise(2*ms, 0, 2048); err != nil || r.Views()[0].MaxModelLen != 2048 {
		t.Errorf("advertise: %v, limit %d", err, r.Views()[0].MaxModelLen)
	}
	if st := statusOf(t, r, 2*ms, 0); st.State != telemetry.Ready {
		t.Errorf("state %v", st.State)
	}
}

// TestRemoveLast: with every backend gone the router rejects, and a new
// backend serves again.
func TestRemoveLast(t *testing.T) {
	r := newRouter(t, "pulsar-waw", 1, 4)
	if _, err := r.Remove(0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if d := r.route(ms, 1, 1); d.Kind != policy.Reject || d.Backend != NoBackend {
		t.Errorf("no backends: %+v, want reject", d)
	}
	id, _, err := r.Add(ms, Backend{Name: "z", Capacity: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := r.route(2*ms, 2, 1); d.Kind != policy.Dispatch || d.Backend != id {
		t.Errorf("after a backend joined: %+v, want dispatch to %d", d, id)
	}
}
