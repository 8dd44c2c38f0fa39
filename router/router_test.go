package router

import (
	"testing"
	"time"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/policy"
)

const ms = time.Millisecond

func newRouter(t *testing.T, name string, n, capacity int) *Router {
	t.Helper()
	bs := make([]policy.Backend, n)
	rb := make([]Backend, n)
	for i := range bs {
		name := string(rune('a' + i))
		bs[i] = policy.Backend{Name: name, Key: policy.KeyOf(name)}
		rb[i] = Backend{Name: name, Capacity: capacity}
	}
	p, err := policy.NewRegistry().New(name, policy.DefaultParams(), bs, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(0, p, rb)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPendingCountsAtPickTime(t *testing.T) {
	r := newRouter(t, "least-request", 2, 10)
	// Three picks before any stats alternate: each pick counts at once.
	var got []BackendID
	for i := range 4 {
		got = append(got, r.route(0, uint64(i), uint64(i)).Backend)
	}
	if got[0] == got[1] || got[2] == got[3] {
		t.Fatalf("picks %v did not spread: pending must count at pick time", got)
	}
	// Stats that have seen one of backend 0's two dispatches leave one pending.
	r.OnStats(5*ms, &gateway.Stats{Backend: 0, Seq: 1, Capacity: 10, Active: 1, Received: []uint64{1}}, nil)
	if v := r.Views()[0]; v.Pending != 1 || v.Active != 1 {
		t.Errorf("view after stats: pending %d active %d, want 1 and 1", v.Pending, v.Active)
	}
	// Stale stats are ignored.
	r.OnStats(6*ms, &gateway.Stats{Backend: 0, Seq: 1, Capacity: 10, Active: 9}, nil)
	if r.Views()[0].Active != 1 {
		t.Error("stale stats were applied")
	}
}

func TestWaitReleasedByStatsAndTimer(t *testing.T) {
	r := newRouter(t, "waw", 3, 1)
	// Fill every backend.
	for b := range 3 {
		r.OnStats(0, &gateway.Stats{Backend: b, Seq: 1, Capacity: 1, Active: 1}, nil)
	}
	d := r.route(0, 1, 99)
	if d.Kind != policy.Wait {
		t.Fatalf("all full: %v, want wait", d.Kind)
	}
	affine := int(d.Backend)
	if at, ok := r.NextTimer(); !ok || at != 300*ms {
		t.Fatalf("timer at %v %v, want 300ms", at, ok)
	}
	// A slot frees at another backend: waw still waits for its affine backend.
	other := (affine + 1) % 3
	if out := r.OnStats(100*ms, &gateway.Stats{Backend: other, Seq: 2, Capacity: 1, Active: 0}, nil); len(out) != 0 {
		t.Fatalf("released %+v on another backend's slot", out)
	}
	// The affine backend frees a slot: released there.
	out := r.OnStats(200*ms, &gateway.Stats{Backend: affine, Seq: 2, Capacity: 1, Active: 0}, nil)
	if len(out) != 1 || out[0].Decision.Kind != policy.Dispatch || out[0].Decision.Backend != BackendID(affine) {
		t.Fatalf("released %+v, want dispatch to %d", out, affine)
	}
	if r.Waiting() != 0 || r.Views()[affine].Queued != 0 {
		t.Error("released request still counted as waiting")
	}
	// Another request waits, then overflows at its deadline.
	r.OnStats(210*ms, &gateway.Stats{Backend: affine, Seq: 3, Capacity: 1, Active: 1}, nil)
	if d := r.route(250*ms, 2, 99); d.Kind != policy.Wait {
		t.Fatalf("second request: %v, want wait", d.Kind)
	}
	out = r.OnTimer(550*ms, nil)
	if len(out) != 1 || out[0].Decision.Kind != policy.Dispatch || out[0].Decision.Backend == BackendID(affine) {
		t.Fatalf("at the deadline: %+v, want overflow", out)
	}
}

func TestCancelWaiter(t *testing.T) {
	r := newRouter(t, "pulsar-waw", 2, 1)
	for b := range 2 {
		r.OnStats(0, &gateway.Stats{Backend: b, Seq: 1, Capacity: 1, Active: 1}, nil)
	}
	d := r.route(0, 7, 1)
	if d.Kind != policy.Wait || !r.Cancel(7) || r.Cancel(7) {
		t.Fatal("cancel of a waiting request failed or repeated")
	}
	if r.Views()[d.Backend].Queued != 0 || r.Waiting() != 0 {
		t.Error("cancelled request still counted")
	}
	if _, ok := r.NextTimer(); ok {
		t.Error("timer left after the only waiter left")
	}
}

// route and routeTokens are Route for a request with only a session, and
// with its tokens.
func (r *Router) route(now time.Duration, id, session uint64) Decision {
	return r.Route(now, id, Ask{Session: session})
}

func (r *Router) routeTokens(now time.Duration, id, session uint64, tokens int) Decision {
	return r.Route(now, id, Ask{Session: session, Tokens: tokens})
}
