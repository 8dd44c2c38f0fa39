package xds

import (
	"strings"
	"testing"
	"time"
)

func eps3(wa, wb, wc uint32) []Endpoint {
	return []Endpoint{
		{ID: "a", Region: "r1", Host: "10.0.0.1", Port: 9000, Weight: wa},
		{ID: "b", Region: "r1", Host: "10.0.0.2", Port: 9000, Weight: wb},
		{ID: "c", Region: "r2", Host: "10.0.0.3", Port: 9000, Weight: wc},
	}
}

func with(eps []Endpoint, f func(e []Endpoint)) []Endpoint {
	out := append([]Endpoint(nil), eps...)
	f(out)
	return out
}

// TestCoalescerSignificance: which changes against the last push are worth a
// push, with a 10% relative share threshold.
func TestCoalescerSignificance(t *testing.T) {
	base := eps3(100, 100, 200) // shares .25 .25 .5
	tests := []struct {
		name string
		next []Endpoint
		want bool
	}{
		{"same", eps3(100, 100, 200), false},
		{"all scaled alike", eps3(300, 300, 600), false},
		{"share moves 4%", eps3(105, 100, 200), false},
		{"share moves 12%", eps3(115, 100, 200), true},
		{"big backend grows 2x", eps3(100, 100, 400), true},
		{"health change", with(base, func(e []Endpoint) { e[0].Health = Draining }), true},
		{"address change", with(base, func(e []Endpoint) { e[1].Port = 9001 }), true},
		{"region change", with(base, func(e []Endpoint) { e[1].Region = "r3" }), true},
		{"backend removed", base[:2], true},
		{"backend added", append(eps3(100, 100, 200), Endpoint{ID: "d", Host: "10.0.0.4", Port: 9000, Weight: 1}), true},
		{"unhealthy backend's weight", with(base, func(e []Endpoint) { e[0].Health = Unhealthy }), true},
	}
	t0 := time.Unix(1000, 0)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewCoalescer(0.1, 200*time.Millisecond)
			c.Offer(t0, base)
			if _, ok := c.Flush(t0.Add(time.Second)); !ok {
				t.Fatal("first offer was not pushed")
			}
			_, got := c.Offer(t0.Add(2*time.Second), tt.next)
			if got != tt.want {
				t.Errorf("pending = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCoalescerWeightOfUnhealthyIgnored: weights of backends that get no
// traffic do not matter.
func TestCoalescerWeightOfUnhealthyIgnored(t *testing.T) {
	t0 := time.Unix(0, 0)
	base := with(eps3(100, 100, 200), func(e []Endpoint) { e[2].Health = Unhealthy })
	c := NewCoalescer(0.1, 0)
	c.Offer(t0, base)
	c.Flush(t0)
	if _, ok := c.Offer(t0, with(base, func(e []Endpoint) { e[2].Weight = 9000 })); ok {
		t.Error("a weight change of an unhealthy backend is pending")
	}
}

// TestCoalescerDriftAddsUp: small steps each under the threshold are pushed
// once they add up past it, since offers compare with the last push.
func TestCoalescerDriftAddsUp(t *testing.T) {
	t0 := time.Unix(0, 0)
	c := NewCoalescer(0.1, 0)
	c.Offer(t0, eps3(100, 100, 100))
	c.Flush(t0)
	pushedAt := -1
	for step := 1; step <= 10; step++ {
		w := uint32(100 + 3*step)
		now := t0.Add(time.Duration(step) * time.Second)
		c.Offer(now, eps3(w, 100, 100))
		if _, ok := c.Flush(now); ok {
			pushedAt = step
			break
		}
	}
	// Share of a: w/(w+200) against 1/3 at the push; passes 10% relative
	// (0.3667) first when w >= 116 -> step 6 (w = 118).
	if pushedAt != 6 {
		t.Errorf("drift pushed at step %d, want 6", pushedAt)
	}
}

// TestCoalescerWindow: a burst of updates inside the window is one push of
// the latest endpoints, at the end of the window opened by the first.
func TestCoalescerWindow(t *testing.T) {
	t0 := time.Unix(0, 0)
	w := 200 * time.Millisecond
	c := NewCoalescer(0.1, w)
	due, ok := c.Offer(t0, eps3(1, 1, 1))
	if !ok || !due.Equal(t0.Add(w)) {
		t.Fatalf("first offer: due %v pending %v, want %v true", due, ok, t0.Add(w))
	}
	for i := 1; i <= 5; i++ {
		d, ok := c.Offer(t0.Add(time.Duration(i)*30*time.Millisecond), eps3(uint32(i), 1, 1))
		if !ok || !d.Equal(due) {
			t.Fatalf("offer %d moved the deadline to %v (pending %v)", i, d, ok)
		}
	}
	if _, ok := c.Flush(t0.Add(w - time.Millisecond)); ok {
		t.Fatal("pushed before the window ended")
	}
	got, ok := c.Flush(due)
	if !ok || got[0].Weight != 5 {
		t.Fatalf("flush at the deadline: %v %v, want the latest offer (weight 5)", got, ok)
	}
	if _, ok := c.Flush(due.Add(time.Second)); ok {
		t.Error("pushed twice")
	}
	if _, ok := c.Pending(); ok {
		t.Error("still pending after the push")
	}
}

// TestCoalescerRevertedChangeIsDropped: a change that is undone before the
// window ends is not pushed.
func TestCoalescerRevertedChangeIsDropped(t *testing.T) {
	t0 := time.Unix(0, 0)
	c := NewCoalescer(0.1, 100*time.Millisecond)
	c.Offer(t0, eps3(1, 1, 1))
	c.Flush(t0.Add(time.Second))
	t1 := t0.Add(2 * time.Second)
	if _, ok := c.Offer(t1, eps3(5, 1, 1)); !ok {
		t.Fatal("change not pending")
	}
	c.Offer(t1.Add(50*time.Millisecond), eps3(1, 1, 1))
	if got, ok := c.Flush(t1.Add(100 * time.Millisecond)); ok {
		t.Errorf("pushed %v after the change was undone", got)
	}
}

// TestCoalescerZeroThreshold: threshold 0 pushes any weight change.
func TestCoalescerZeroThreshold(t *testing.T) {
	t0 := time.Unix(0, 0)
	c := NewCoalescer(-1, -time.Second)
	c.Offer(t0, eps3(1000, 1000, 1000))
	c.Flush(t0)
	due, ok := c.Offer(t0, eps3(1001, 1000, 1000))
	if !ok || !due.Equal(t0) {
		t.Errorf("a 0.1%% change with threshold 0 and no window: due %v pending %v", due, ok)
	}
}

func TestNormalize(t *testing.T) {
	got, err := normalize([]Endpoint{
		{ID: "z", Host: "10.0.0.9", Port: 1, Weight: 0},
		{ID: "a", Host: "10.0.0.1", Port: 2, Weight: 7, Health: Draining},
		{ID: "", Host: "10.0.0.2", Port: 3},
		{ID: "a", Host: "10.0.0.3", Port: 4},
		{ID: "noport", Host: "10.0.0.4"},
		{ID: "bigport", Host: "10.0.0.4", Port: 70000},
		{ID: "nohost", Port: 5},
		{ID: "weird", Host: "10.0.0.5", Port: 6, Health: Health(9)},
	})
	if len(got) != 2 || got[0].ID != "a" || got[1].ID != "z" || got[0].Weight != 7 || got[1].Weight != 1 {
		t.Errorf("normalize kept %+v, want a (weight 7) then z (weight 1)", got)
	}
	if err == nil {
		t.Fatal("no error for the endpoints left out")
	}
	for _, want := range []string{"endpoint 2 has no ID", `"a" is listed twice`, `"noport"`, `"bigport"`, `"nohost"`, `"weird": unknown health 9`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestNormalizeScalesHugeWeights(t *testing.T) {
	in := []Endpoint{
		{ID: "a", Host: "h", Port: 1, Weight: 4_000_000_000},
		{ID: "b", Host: "h", Port: 2, Weight: 2_000_000_000},
		{ID: "c", Host: "h", Port: 3, Weight: 1},
	}
	got, err := normalize(in)
	if err != nil {
		t.Fatal(err)
	}
	var sum uint64
	for _, e := range got {
		sum += uint64(e.Weight)
		if e.Weight == 0 {
			t.Errorf("%s scaled to 0", e.ID)
		}
	}
	if sum > maxTotalWeight {
		t.Errorf("sum %d over %d", sum, uint64(maxTotalWeight))
	}
	if r := float64(got[0].Weight) / float64(got[1].Weight); r < 1.999 || r > 2.001 {
		t.Errorf("ratio a/b = %v after scaling, want 2", r)
	}
}

// A router that has not learnt any gateway yet offers an empty list; pushing
// it would replace the endpoints an Envoy still holds from before a restart
// with nothing. The first push waits for a first endpoint; after it, an empty
// list is a real change and is pushed.
func TestCoalescerWaitsForFirstEndpoints(t *testing.T) {
	t0 := time.Unix(0, 0)
	c := NewCoalescer(0.1, 200*time.Millisecond)
	for i, eps := range [][]Endpoint{nil, {}} {
		if _, ok := c.Offer(t0.Add(time.Duration(i)*time.Second), eps); ok {
			t.Fatalf("offer %d of no endpoints before any push: a push is pending", i)
		}
		if _, ok := c.Flush(t0.Add(time.Duration(i)*time.Second + time.Second)); ok {
			t.Fatalf("flush %d before any endpoint: pushed an empty snapshot", i)
		}
	}
	due, ok := c.Offer(t0.Add(3*time.Second), eps3(1, 1, 1))
	if !ok {
		t.Fatal("first endpoints offered: no push pending")
	}
	if eps, ok := c.Flush(due); !ok || len(eps) != 3 {
		t.Fatalf("first push = %d endpoints, %v; want 3, true", len(eps), ok)
	}
	due, ok = c.Offer(due.Add(time.Second), nil)
	if !ok {
		t.Fatal("every endpoint gone after a push: no push pending")
	}
	if eps, ok := c.Flush(due); !ok || len(eps) != 0 {
		t.Fatalf("push after every endpoint left = %d endpoints, %v; want 0, true", len(eps), ok)
	}
}
