package study

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/gateway"
)

// TestRestartPhaseNoCascade: a backend whose engine dies under load and
// comes back gets nothing while its gateway reports Loading (the engine
// gone, then its warm-up), gets traffic again once Ready, and no turn
// fails or misses its SLO on the way.
func TestRestartPhaseNoCascade(t *testing.T) {
	specs, err := ResilienceSpecs(ResilienceOptions{Replicates: 2, Phases: []string{"restart"}, Policies: []string{"pulsar-waw"}})
	if err != nil {
		t.Fatal(err)
	}
	specs = specs[:1]
	sp := &specs[0]
	sp.Onset, sp.Pre, sp.Post = 60*time.Second, 20*time.Second, 30*time.Second
	runs, err := SimPhaseRunner{Parallel: 1}.RunPhases(context.Background(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	var marks []string
	for _, mk := range r.Marks {
		if mk.Backend == faultyBackend {
			marks = append(marks, mk.What)
		}
	}
	if !slices.Contains(marks, "fault:restart") || !slices.Contains(marks, "end:restart") {
		t.Fatalf("marks of backend %d: %v, want the restart's start and end", faultyBackend, marks)
	}
	before := 0
	for _, d := range r.Dispatches {
		if d.Backend == faultyBackend && d.At < sp.Onset {
			before++
		}
	}
	if before == 0 {
		t.Fatal("the restarting backend served nothing before the onset: the phase tests nothing")
	}
	m := Measure(r)
	x := m.Extra
	if x == nil {
		t.Fatal("no restart measures")
	}
	if x.LoadingDispatches != 0 {
		t.Errorf("%d dispatches to the backend while it was Loading, want 0", x.LoadingDispatches)
	}
	ready := (RestartEngineDown + gateway.DefaultWarmUp).Seconds()
	if x.BackS < ready {
		t.Errorf("traffic back %.2f s after the death, want after it is Ready (%.0f s)", x.BackS, ready)
	}
	if m.SuccessPct != 100 || x.OthersGoodPct < 99 {
		t.Errorf("success %.2f%%, other backends' SLO attainment %.2f%%: want 100%% and at least 99%%", m.SuccessPct, x.OthersGoodPct)
	}
	lines := (&ResilienceResults{Runs: []PhaseMetrics{m}}).SeedLines()
	if len(lines) != 1 {
		t.Errorf("report lines %q, want one for the restart phase", lines)
	}
}
