package study

import (
	"context"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/slowtest"
	"github.com/stargate-llm/stargate/sim"
)

// TestLivePhases runs two short live phases and checks that each fault was
// applied on the running fleet and that Measure sees it: the killed backend
// gets no dispatch from a router once that router has marked it Failed;
// requests over the imposed limit stop reaching a limited backend once a
// router has learned its limit from its first 400 there.
//
// Timings on a live fleet stretch with the machine's load, so the checks
// are on order, not on speed: each router marks the killed backend Failed
// after the kill and before the run ends (its TTL is 1.5 s; how soon is
// the study's figure, not this test's), and sends nothing there afterwards.
func TestLivePhases(t *testing.T) {
	slowtest.Skip(t, "live fleet runs")
	limited := []int{3, 4, 5}
	const limit = 5000
	capability := Phase{Name: "capability", Faulty: limited, Limit: limit, Describe: "test",
		Faults: func(at time.Duration) []sim.Fault {
			return []sim.Fault{{Kind: sim.FaultLimit, Backends: limited, At: at, Limit: limit}}
		}}
	var failover Phase
	for _, p := range ResiliencePhases() {
		if p.Name == "failover" {
			failover = p
		}
	}
	base := PhaseSpec{Seed: 1, RPS: 20, Onset: 7 * time.Second, Pre: 3 * time.Second, Post: 6 * time.Second, Scale: LiveScale, Mode: "live"}
	specs := []PhaseSpec{base, base}
	specs[0].Phase, specs[0].Policy = failover, "pressure"
	specs[1].Phase, specs[1].Policy = capability, "round-robin"
	runs, err := LivePhaseRunner{}.RunPhases(context.Background(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}

	fo := runs[0]
	m := Measure(fo)
	if m.Turns == 0 || len(fo.Records) == 0 {
		t.Fatalf("failover measured no turn: %+v", m)
	}
	if len(fo.RouterFailedAt) != 3 {
		t.Fatalf("router failed-at %v, want one per router", fo.RouterFailedAt)
	}
	for r, at := range fo.RouterFailedAt {
		if at < fo.Spec.Onset || at > fo.Spec.Onset+fo.Spec.Post {
			t.Errorf("router %d marked the killed backend Failed at %v (onset %v)", r, at, fo.Spec.Onset)
		}
		for _, d := range fo.Dispatches {
			if d.Router == r && d.Backend == 4 && d.At > at {
				t.Errorf("router %d sent to the killed backend at %v, after it marked it Failed at %v", r, d.At, at)
			}
		}
	}
	if m.RouterDetectS < 0 || m.RouterDetectS > fo.Spec.Post.Seconds() {
		t.Errorf("router detect %v s", m.RouterDetectS)
	}
	if !hasMark(fo.Marks, "fault:kill") {
		t.Errorf("no kill mark in %v", fo.Marks)
	}
	// Dispatches name the driver's sessions, so that turns and their
	// dispatches can be matched (the reroute time).
	sessions := map[uint64]bool{}
	for _, r := range fo.Records {
		sessions[r.Session] = true
	}
	matched := 0
	for _, d := range fo.Dispatches {
		if sessions[d.Session] {
			matched++
		}
	}
	if matched == 0 || matched < len(fo.Records) {
		t.Errorf("%d of %d dispatches name a recorded session (%d records)", matched, len(fo.Dispatches), len(fo.Records))
	}

	ca := runs[1]
	m = Measure(ca)
	long := 0
	for _, d := range ca.Dispatches {
		if d.At >= ca.Spec.Onset && d.Tokens > limit {
			long++
		}
	}
	switch {
	case long == 0:
		t.Fatal("no long dispatch after the onset")
	case long < 10:
		// How many long prompts the driver gets dispatched in the 6 s
		// after the onset depends on the machine's load (5 at load
		// average 30): too few to tell a learned limit from luck.
		t.Skipf("only %d long dispatches after the onset on this loaded machine; the capability half needs 10", long)
	}
	if m.Misroutes == 0 || m.Misroutes > 2*3*len(limited) {
		t.Errorf("%d misroutes over %d long dispatches: want at least one (the fault applied) and few (each router learns each limit from its first 400)", m.Misroutes, long)
	}
	// Each router learns a backend's limit from the first 400 it gets
	// there: a later misroute of the same pair can only be one sent while
	// that answer was on its way.
	type pair struct{ router, backend int }
	first := map[pair]time.Duration{}
	for _, d := range ca.Dispatches {
		if !d.Misroute {
			continue
		}
		k := pair{d.Router, d.Backend}
		at, seen := first[k]
		if !seen {
			first[k] = d.At
		} else if d.At > at+time.Second {
			t.Errorf("router %d sent a long request to limited backend %d at %v, %v after its first 400", d.Router, d.Backend, d.At, d.At-at)
		}
	}
	if !hasMark(ca.Marks, "fault:limit") {
		t.Errorf("no limit mark in %v", ca.Marks)
	}
}

func hasMark(ms []sim.Mark, what string) bool {
	for _, m := range ms {
		if m.What == what {
			return true
		}
	}
	return false
}
