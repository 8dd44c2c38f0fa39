package study

import (
	"bytes"
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/metrics"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/telemetry"
)

// shortRunner shortens every spec so the test stays quick.
type shortRunner struct{ SimPhaseRunner }

func (r shortRunner) RunPhases(ctx context.Context, specs []PhaseSpec, p Progress) ([]PhaseRun, error) {
	for i := range specs {
		specs[i].Onset, specs[i].Pre, specs[i].Post = 60*time.Second, 20*time.Second, 20*time.Second
	}
	return r.SimPhaseRunner.RunPhases(ctx, specs, p)
}

func TestResilienceShort(t *testing.T) {
	res, err := Resilience(context.Background(), ResilienceOptions{Replicates: 2, Phases: []string{"capability", "failover"},
		Policies: []string{"pressure", "round-robin"}, Runner: shortRunner{SimPhaseRunner{Parallel: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Runs) != 8 {
		t.Fatalf("%d runs, want 8", len(res.Runs))
	}
	cells := res.Cells()
	p, rr := findCell(cells, "capability", "pressure"), findCell(cells, "capability", "round-robin")
	if p == nil || rr == nil || p.Misroutes.Mean >= rr.Misroutes.Mean || rr.Leak.Mean == 0 {
		t.Errorf("capability misroutes: pressure %+v, round-robin %+v", p, rr)
	}
	f := findCell(cells, "failover", "pressure")
	if f == nil || !f.HasRouterMark || f.RouterDetect.Mean > 1 {
		t.Errorf("failover: routers should mark the killed backend Failed within 1 s: %+v", f)
	}
	var js, html, txt bytes.Buffer
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteHTML(&html); err != nil {
		t.Fatal(err)
	}
	tab := res.Table()
	if err := tab.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"criteria"`) || !strings.Contains(html.String(), "<svg") || !strings.Contains(txt.String(), "capability") {
		t.Error("report files are missing their parts")
	}
	if len(res.Criteria()) != 10 {
		t.Errorf("criteria %+v, want 10 (success, p95 and paired p95 for two phases, two targets each)", res.Criteria())
	}
}

func TestResilienceOptionsChecked(t *testing.T) {
	for _, o := range []ResilienceOptions{{Replicates: 1}, {Phases: []string{"meteor"}}} {
		if _, err := ResilienceSpecs(o); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	// Post replaces the measured span after the onset, quick or not.
	for _, quick := range []bool{false, true} {
		specs, err := ResilienceSpecs(ResilienceOptions{Quick: quick, Post: 4 * time.Minute, Phases: []string{"capability"}})
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range specs {
			if sp.Post != 4*time.Minute {
				t.Fatalf("quick %v: post %v, want 4m", quick, sp.Post)
			}
		}
	}
}

// TestWanJitterAblation: the wan-jitter phase adds pressure without the
// network signals to the arms, unless the policies are chosen.
func TestWanJitterAblation(t *testing.T) {
	count := func(opts ResilienceOptions) int {
		specs, err := ResilienceSpecs(opts)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, sp := range specs {
			if sp.Policy == PressureNoNet {
				n++
			}
		}
		return n
	}
	if n := count(ResilienceOptions{Quick: true, Phases: []string{"wan-jitter", "failover"}}); n != 2 {
		t.Errorf("%d %s runs, want 2 (wan-jitter only, 2 replicates)", n, PressureNoNet)
	}
	if n := count(ResilienceOptions{Quick: true, Phases: []string{"wan-jitter"}, Policies: []string{"pressure"}}); n != 0 {
		t.Errorf("%d %s runs with the policies chosen, want 0", n, PressureNoNet)
	}
	backends := []policy.Backend{{Name: "a", Key: policy.KeyOf("a")}, {Name: "b", Key: policy.KeyOf("b")}}
	pol, err := ResilienceRegistry().New(PressureNoNet, policy.DefaultParams(), backends, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Same signals, one with a jittery path: only pressure's weights move.
	views := []policy.View{{Capacity: 4, Eligible: true}, {Capacity: 4, Eligible: true,
		Path: telemetry.Path{Known: true, RTT: 60 * time.Millisecond, Jitter: 40 * time.Millisecond}}}
	withNet, err := policy.NewRegistry().New("pressure", policy.DefaultParams(), backends, nil)
	if err != nil {
		t.Fatal(err)
	}
	nn := policy.WeightsOf(pol, views)
	wn := policy.WeightsOf(withNet, views)
	if nn[0].Rank != nn[1].Rank || wn[1].Rank >= wn[0].Rank {
		t.Errorf("ranks without network signals %d/%d (want equal), with %d/%d (want the jittery one lower)", nn[0].Rank, nn[1].Rank, wn[0].Rank, wn[1].Rank)
	}
}

// TestLiveSpecs: a live study pairs every run with its simulator twin at
// the live scale, with the live policies and windows.
func TestLiveSpecs(t *testing.T) {
	specs, err := ResilienceSpecs(ResilienceOptions{Quick: true, Live: LivePhaseRunner{}, Phases: []string{"failover"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != 2*len(LivePolicies)*2 {
		t.Fatalf("%d specs, want %d", len(specs), 2*len(LivePolicies)*2)
	}
	fl, factor := ResilienceFleetAt(LiveScale)
	gpus := 0
	for _, r := range fl.Regions {
		for _, b := range r.Backends {
			gpus += b.GPUs
		}
	}
	if gpus != 9 || factor != 0.25 {
		t.Fatalf("live fleet: %d GPUs, rate factor %v; want 9 and 0.25", gpus, factor)
	}
	for i, sp := range specs {
		want := []string{"sim", "live"}[i%2]
		if sp.Mode != want || sp.Scale != LiveScale || sp.RPS != ResilienceRPS*0.25 || sp.Onset != 90*time.Second || sp.Post != 30*time.Second {
			t.Errorf("spec %d: %+v", i, sp)
		}
		if i%2 == 1 && (sp.Policy != specs[i-1].Policy || sp.Seed != specs[i-1].Seed) {
			t.Errorf("spec %d is not its twin's pair", i)
		}
	}
}

func TestMeasure(t *testing.T) {
	rec := func(end time.Duration, ttft time.Duration, ok bool) metrics.TurnRecord {
		return metrics.TurnRecord{Start: end - time.Second, FirstToken: end - time.Second + ttft, End: end, Completed: ok}
	}
	onset := 100 * time.Second
	spec := PhaseSpec{Phase: Phase{Name: "failover", Faulty: []int{1}}, Onset: onset, Pre: 10 * time.Second, Post: 20 * time.Second}
	var recs []metrics.TurnRecord
	for i := range 10 {
		recs = append(recs, rec(onset-time.Duration(i+1)*time.Second, 100*time.Millisecond, true))
	}
	for i := range 20 {
		recs = append(recs, rec(onset+time.Duration(i)*time.Second+time.Millisecond, time.Duration(100+100*i)*time.Millisecond, i != 3))
	}
	ds := []sim.Dispatch{{At: onset + 500*time.Millisecond, Backend: 1, Misroute: true}, {At: onset + time.Second, Backend: 0}}
	m := Measure(PhaseRun{Spec: spec, Records: recs, Dispatches: ds, RouterFailedAt: []time.Duration{onset + 700*time.Millisecond}})
	if m.Turns != 20 || m.SuccessPct != 95 || m.Misroutes != 1 || m.DetectS != 0.5 || !m.Detected || m.RouterDetectS != 0.7 {
		t.Errorf("measured %+v", m)
	}
	// TTFT grows past 1.5 x 0.1 + 0.25 s by the first bin: never recovered.
	if m.RecoverS != 20 {
		t.Errorf("recover %v, want 20 (the last bin is unhealthy)", m.RecoverS)
	}
	// The turn ending at onset + 1 s: sent to the killed backend at 0.5 s,
	// served by backend 0 from 1 s.
	if m.RerouteTurns != 1 || m.RerouteFailed != 0 || math.Abs(m.RerouteP99S-0.5) > 1e-9 {
		t.Errorf("reroute: %d turns (%d failed), p99 %v; want 1, 0 and 0.5 s", m.RerouteTurns, m.RerouteFailed, m.RerouteP99S)
	}
	if s := NewStat([]float64{1, 2, 3}); s.Mean != 2 || s.Half < 2.48 || s.Half > 2.49 {
		t.Errorf("stat %+v, want mean 2, half 4.303 x 1/sqrt(3) = 2.484", s)
	}
}

// TestRerouteTimes: a turn's reroute time runs from when the kill caught it
// to the dispatch that then served it; turns the kill did not catch do not
// count, and caught turns that failed are counted apart.
func TestRerouteTimes(t *testing.T) {
	on := 100 * time.Second
	ms := func(n int) time.Duration { return on + time.Duration(n)*time.Millisecond }
	rec := func(session uint64, start, end time.Duration, ok bool) metrics.TurnRecord {
		return metrics.TurnRecord{Session: session, Start: start, FirstToken: end, End: end, Completed: ok}
	}
	recs := []metrics.TurnRecord{
		rec(1, ms(-5000), ms(3000), true),  // in flight on the killed backend: 150 ms
		rec(2, ms(1000), ms(2000), true),   // sent there after the kill: 40 ms
		rec(3, ms(-2000), ms(1), true),     // served there just before the kill
		rec(4, ms(2000), ms(2500), false),  // sent there, then failed
		rec(5, ms(500), ms(1500), true),    // never there
		rec(1, ms(4000), ms(5000), true),   // session 1's next turn, elsewhere
		rec(6, ms(-3000), ms(-1000), true), // before the window
	}
	ds := []sim.Dispatch{
		{At: ms(-5000), Session: 1, Backend: 1}, {At: ms(150), Session: 1, Backend: 0},
		{At: ms(1000), Session: 2, Backend: 1}, {At: ms(1040), Session: 2, Backend: 2},
		{At: ms(-2000), Session: 3, Backend: 1},
		{At: ms(2000), Session: 4, Backend: 1},
		{At: ms(500), Session: 5, Backend: 0},
		{At: ms(4000), Session: 1, Backend: 0},
		{At: ms(-3000), Session: 6, Backend: 1},
	}
	times, failed := rerouteTimes(recs, ds, []int{1}, on, on+time.Minute)
	slices.Sort(times)
	if len(times) != 2 || math.Abs(times[0]-0.04) > 1e-9 || math.Abs(times[1]-0.15) > 1e-9 || failed != 1 {
		t.Errorf("reroute times %v, %d failed; want [0.04 0.15] and 1", times, failed)
	}
}

// TestBurstReaction: each burst's reaction is its first weight change before
// the next burst; a burst without one counts to the end of its span.
func TestBurstReaction(t *testing.T) {
	s := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	mk := func(at float64, what string) sim.Mark { return sim.Mark{At: s(at), Backend: -1, What: what} }
	for _, tc := range []struct {
		name  string
		marks []sim.Mark
		want  float64
		all   bool
	}{
		{"no weights", []sim.Mark{mk(100, "fault:burst"), mk(130, "fault:burst")}, -1, false},
		{"both react", []sim.Mark{mk(99, "weights"), mk(100, "fault:burst"), mk(101.5, "weights"), mk(101.7, "weights"),
			mk(130, "fault:burst"), mk(130.4, "weights")}, 1.5, true},
		{"second never", []sim.Mark{mk(100, "fault:burst"), mk(100.2, "weights"), mk(130, "fault:burst")}, 30, false},
		{"before the window", []sim.Mark{mk(70, "fault:burst"), mk(70.1, "weights"), mk(100, "fault:burst"), mk(102, "weights")}, 2, true},
	} {
		got, all := burstReaction(tc.marks, s(100), s(160))
		if math.Abs(got-tc.want) > 1e-9 || all != tc.all {
			t.Errorf("%s: reaction %v (all %v), want %v (%v)", tc.name, got, all, tc.want, tc.all)
		}
	}
}
