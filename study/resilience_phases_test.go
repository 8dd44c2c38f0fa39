package study

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/metrics"
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
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "restart pulsar-waw: other backends'") }) {
		t.Errorf("report lines %q lack the restart phase's", lines)
	}
	if x.E2EP95S <= m.P95S || x.E2EP50S <= 0 {
		t.Errorf("E2E p50 %.3f s, p95 %.3f s against TTFT p95 %.3f s: want E2E, which includes the output, longer", x.E2EP50S, x.E2EP95S, m.P95S)
	}
	if x.MaxGapS <= 0 || x.MaxGapS > MaxSampleGap.Seconds() {
		t.Errorf("longest gap between samples %.3f s, want within (0, %v] at 45 req/s", x.MaxGapS, MaxSampleGap)
	}
}

// TestNetworkSubPhases: the five sub-phases run with the Solyx AI Grid paper's three arms
// by default, at their own loads, the recovery's jitter ending at the
// onset; the report sets each arm's p95 beside the Solyx AI Grid paper's.
func TestNetworkSubPhases(t *testing.T) {
	names := []string{"net-near-idle", "net-symmetric", "net-saturation", "net-jitter-20ms", "net-recovery"}
	specs, err := ResilienceSpecs(ResilienceOptions{Replicates: 2, Phases: names})
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) != len(names)*len(NetworkArms)*2 {
		t.Fatalf("%d specs, want %d (5 sub-phases x 3 arms x 2 seeds)", len(specs), len(names)*len(NetworkArms)*2)
	}
	var runs []PhaseMetrics
	for _, sp := range specs {
		if !slices.Contains(NetworkArms, sp.Policy) {
			t.Errorf("%s runs %s, not one of the Solyx AI Grid paper's arms", sp.Phase.Name, sp.Policy)
		}
		want := float64(ResilienceRPS)
		switch sp.Phase.Name {
		case "net-near-idle":
			want *= nearIdleLoad
		case "net-saturation":
			want *= saturationLoad
		}
		if sp.RPS != want {
			t.Errorf("%s at %.2f req/s, want %.2f", sp.Phase.Name, sp.RPS, want)
		}
		if sp.Phase.Name == "net-recovery" {
			fs := sp.Phase.Faults(sp.Onset)
			if len(fs) != 1 || fs[0].Until != sp.Onset || fs[0].At >= sp.Onset {
				t.Errorf("recovery faults %+v: want jitter before the onset, ending at it", fs)
			}
		}
		// A synthetic result: 10-signal faster than gpu-only, faster than round-robin.
		p95 := map[string]float64{"round-robin": 2, PressureNoNet: 1, "pressure": 0.8}[sp.Policy]
		runs = append(runs, PhaseMetrics{Phase: sp.Phase.Name, Policy: sp.Policy, Seed: sp.Seed, P95S: p95})
	}
	lines := (&ResilienceResults{Runs: runs}).NetworkLines()
	grouped, err := ResilienceSpecs(ResilienceOptions{Replicates: 2, Phases: []string{NetworkPhaseGroup}})
	if err != nil || len(grouped) != len(specs) {
		t.Errorf("--phase network: %d specs (%v), want the %d of the five sub-phases", len(grouped), err, len(specs))
	}
	all, _ := ResilienceSpecs(ResilienceOptions{Replicates: 2})
	if slices.ContainsFunc(all, func(sp PhaseSpec) bool { return strings.HasPrefix(sp.Phase.Name, "net-") }) {
		t.Error("the whole study runs the network sub-phases; they run only when named")
	}
	if len(lines) != 1+len(names) {
		t.Fatalf("network lines %q, want a header and one per sub-phase", lines)
	}
	if !strings.Contains(lines[1], "gain 20.0%") || !strings.Contains(lines[1], "paper 0.587") {
		t.Errorf("near-idle line %q: want the 20%% gain of 1.0 -> 0.8 s and the Solyx AI Grid paper's 587 ms", lines[1])
	}
}

// calRunner answers calibration steps with a p95 that depends on the policy.
type calRunner struct{ specs []StepSpec }

func (c *calRunner) Step(_ context.Context, s StepSpec) (StepFigures, error) {
	c.specs = append(c.specs, s)
	p95 := map[string]float64{"round-robin": 0.9, "pressure": 0.4}[s.Policy]
	return StepFigures{Rate: s.Rate, Sent: 600, Completed: 600, Success: 1, TTFTP95S: p95}, nil
}

// TestCalibration: every policy runs baseline_mixed at 10 req/s for 60 s
// with no warm-up, and the report names the lowest p95.
func TestCalibration(t *testing.T) {
	var r calRunner
	cal, err := Calibrate(context.Background(), &r, []string{"round-robin", "pressure"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.specs) != 2 || len(cal) != 2 {
		t.Fatalf("%d steps, %d results; want one per policy", len(r.specs), len(cal))
	}
	for _, s := range r.specs {
		if s.Class.Name != "baseline_mixed" || s.Rate != 10 || s.Warmup != 0 || s.Measure != 60*time.Second {
			t.Errorf("calibration step %s at %v req/s, warm-up %v, measured %v; want baseline_mixed, 10, 0, 60 s", s.Class.Name, s.Rate, s.Warmup, s.Measure)
		}
	}
	lines := calibrationLines(cal)
	if len(lines) != 4 || !strings.HasSuffix(lines[3], "pressure") {
		t.Errorf("calibration lines %q: want a header, one per policy and pressure as the lowest p95", lines)
	}
}

// TestGapCheck: a run whose samples leave a gap over 5 s fails the study's
// data-integrity check, which names it; one within passes.
func TestGapCheck(t *testing.T) {
	run := func(ends ...time.Duration) PhaseRun {
		sp := PhaseSpec{Phase: Phase{Name: "baseline"}, Policy: "pressure", Seed: 3, Onset: 30 * time.Second, Pre: 10 * time.Second, Post: 20 * time.Second}
		r := PhaseRun{Spec: sp}
		for _, e := range ends {
			r.Records = append(r.Records, metrics.TurnRecord{Start: e - time.Second, FirstToken: e - 900*time.Millisecond, End: e, Completed: true})
		}
		return r
	}
	ok := Measure(run(21*time.Second, 25*time.Second, 29*time.Second, 33*time.Second, 37*time.Second, 41*time.Second, 45*time.Second, 49*time.Second))
	bad := Measure(run(21*time.Second, 25*time.Second, 31500*time.Millisecond, 35*time.Second))
	if ok.Extra.MaxGapS != 4 || bad.Extra.MaxGapS != 6.5 {
		t.Fatalf("gaps %.2f and %.2f s, want 4 and 6.5", ok.Extra.MaxGapS, bad.Extra.MaxGapS)
	}
	if err := (&ResilienceResults{Runs: []PhaseMetrics{ok}}).CheckGaps(); err != nil {
		t.Errorf("a 4 s gap failed the check: %v", err)
	}
	err := (&ResilienceResults{Runs: []PhaseMetrics{ok, bad}}).CheckGaps()
	if err == nil || !strings.Contains(err.Error(), "baseline pressure seed 3: 6.50 s") {
		t.Errorf("a 6.5 s gap: %v, want an error naming the run", err)
	}
	if ok.Extra.E2EP50S != 1 {
		t.Errorf("E2E p50 %.3f s, want 1 s", ok.Extra.E2EP50S)
	}
}

// TestOtherFleet: the study runs on another fleet at the study's rate per
// GPU, and refuses a phase that names a backend the fleet lacks.
func TestOtherFleet(t *testing.T) {
	fl, err := config.Load("../examples/solyx-six-gpu.yaml")
	if err != nil {
		t.Fatal(err)
	}
	specs, err := ResilienceSpecs(ResilienceOptions{Replicates: 2, Phases: []string{"failover", "restart"}, Fleet: fl})
	if err != nil {
		t.Fatal(err)
	}
	for _, sp := range specs {
		if sp.Fleet != fl || sp.RPS != 7.5 {
			t.Fatalf("spec on fleet %v at %.2f req/s, want the six-GPU fleet at 7.5 (45 x 6/36)", sp.Fleet, sp.RPS)
		}
	}
	if rs := resilienceRunSpec(specs[0]); len(rs.Fleet.Regions) != 3 || rs.Fleet.Name != "solyx-six-gpu" {
		t.Errorf("run spec fleet %s, want solyx-six-gpu", rs.Fleet.Name)
	}
	for _, phase := range []string{"wan-jitter", "telemetry-loss"} {
		_, err := ResilienceSpecs(ResilienceOptions{Replicates: 2, Phases: []string{phase}, Fleet: fl})
		if !errors.Is(err, ErrBadOptions) || !strings.Contains(err.Error(), "6 backends") {
			t.Errorf("%s on six backends: %v, want ErrBadOptions naming the fleet's size", phase, err)
		}
	}
	if _, err := ResilienceSpecs(ResilienceOptions{Replicates: 2, Phases: []string{"failover"}, Fleet: fl, Live: LivePhaseRunner{}}); !errors.Is(err, ErrBadOptions) {
		t.Errorf("a live study on another fleet: %v, want ErrBadOptions", err)
	}
}
