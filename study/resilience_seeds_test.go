package study

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSolyxTTLPhase: with the Solyx AI Grid paper's 500 ms heartbeat TTL the
// routers mark the killed backend Failed sooner than with ours, in the same
// runs otherwise; the report sets the two side by side. The phase is not
// offered to a live study.
func TestSolyxTTLPhase(t *testing.T) {
	res, err := Resilience(context.Background(), ResilienceOptions{Replicates: 2, Phases: []string{"failover", "failover-ttl500"},
		Policies: []string{"pressure"}, Runner: shortRunner{SimPhaseRunner{Parallel: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	cells := res.Cells()
	ours, solyx := findCell(cells, "failover", "pressure"), findCell(cells, "failover-ttl500", "pressure")
	if ours == nil || solyx == nil || !ours.HasRouterMark || !solyx.HasRouterMark {
		t.Fatalf("cells: %+v and %+v", ours, solyx)
	}
	if solyx.RouterDetect.Mean >= ours.RouterDetect.Mean {
		t.Errorf("router detection with TTL 500 ms %.3f s, with ours %.3f s: want the shorter TTL sooner", solyx.RouterDetect.Mean, ours.RouterDetect.Mean)
	}
	if solyx.RerouteTurns == 0 && ours.RerouteTurns > 0 {
		t.Errorf("failover-ttl500 measured no reroutes: it should take the failover phase's measures")
	}
	found := false
	for _, s := range res.PaperComparison() {
		found = found || len(s) > 18 && s[:18] == "Failure detection:"
	}
	if !found {
		t.Errorf("no failure-detection comparison in %q", res.PaperComparison())
	}
	_, err = ResilienceSpecs(ResilienceOptions{Phases: []string{"failover-ttl500"}, Live: LivePhaseRunner{}})
	if !errors.Is(err, ErrBadOptions) {
		t.Errorf("live study with a simulator-only phase: error %v, want ErrBadOptions", err)
	}
}

// TestCellExporterPhase: killing each backend's exporter on its own, every
// backend falls back once, within a report interval of its own exporter's
// death, and success stays whole.
func TestCellExporterPhase(t *testing.T) {
	specs, err := ResilienceSpecs(ResilienceOptions{Replicates: 2, Phases: []string{"telemetry-loss-each"}, Policies: []string{"pressure"}})
	if err != nil {
		t.Fatal(err)
	}
	specs = specs[:1]
	specs[0].Onset, specs[0].Pre, specs[0].Post = 60*time.Second, 20*time.Second, 30*time.Second
	runs, err := SimPhaseRunner{Parallel: 1}.RunPhases(context.Background(), specs, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, mk := range runs[0].Marks {
		if mk.What == "fallback" && mk.At >= specs[0].Onset {
			if seen[mk.Backend] {
				t.Errorf("backend %d fell back twice", mk.Backend)
			}
			seen[mk.Backend] = true
		}
	}
	if len(seen) != 9 {
		t.Errorf("%d backends fell back, want all 9, each on its own", len(seen))
	}
	m := Measure(runs[0])
	if !m.Detected || m.DetectS < 0 || m.DetectS > 0.5 {
		t.Errorf("fallback %.3f s (detected %v) after the exporter died, want within one 500 ms report", m.DetectS, m.Detected)
	}
}
