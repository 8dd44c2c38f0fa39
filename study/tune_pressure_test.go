package study

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/sim"
	"github.com/stargate-llm/stargate/telemetry"
)

var (
	tuneFlag = flag.Bool("tune", false, "run the pressure tuning search (TestTunePressure; several minutes)")
	tuneOut  = flag.String("tune-out", "", "directory for the tuning result (tune.json, pressure.yaml, tune.md); empty: only the test log")
	tuneN    = flag.Int("tune-seeds", 20, "training seeds of the tuning search: 11 to 10+N")
	tuneR    = flag.Int("tune-rounds", 2, "the tuning search's rounds at most")
)

// TestCoordinateSearch: the search finds the minimum of a separable
// objective on the grid, visits coordinates in order, never moves on a tie,
// and gives the same steps on every run.
func TestCoordinateSearch(t *testing.T) {
	space := []TuneParam{
		weightParam("queue", []float64{0, 0.5, 1}, telemetry.SigQueue),
		weightParam("thermal", []float64{0, 0.2, 0.4, 0.6}, telemetry.SigThermal),
		weightParam("jitter", []float64{0, 0.25, 0.5}, telemetry.SigJitter),
	}
	// Minimum at queue 0.5, thermal 0.4; jitter does not matter (ties).
	eval := func(pp policy.PressureParams) (float64, error) {
		q, th := pp.Weights[telemetry.SigQueue], pp.Weights[telemetry.SigThermal]
		return math.Abs(q-0.5) + (th-0.4)*(th-0.4), nil
	}
	start := policy.DefaultPressureParams()
	start.Weights[telemetry.SigJitter] = 0.25
	got, steps, err := CoordinateSearch(start, space, 3, eval)
	if err != nil {
		t.Fatal(err)
	}
	if got.Weights[telemetry.SigQueue] != 0.5 || got.Weights[telemetry.SigThermal] != 0.4 || got.Weights[telemetry.SigJitter] != 0.25 {
		t.Errorf("tuned weights queue %v thermal %v jitter %v, want 0.5, 0.4 and 0.25 (a tie keeps the start)",
			got.Weights[telemetry.SigQueue], got.Weights[telemetry.SigThermal], got.Weights[telemetry.SigJitter])
	}
	again, steps2, _ := CoordinateSearch(start, space, 3, eval)
	if again != got || fmt.Sprint(steps) != fmt.Sprint(steps2) {
		t.Error("the search is not deterministic")
	}
	// Round 2 changes nothing, so the search stops there.
	if last := steps[len(steps)-1]; last.Round != 2 {
		t.Errorf("last step in round %d, want 2 (a round without change ends the search)", last.Round)
	}
	if _, err := TunePressure(context.Background(), TuneOptions{Train: []uint64{1}, Test: []uint64{1}, Start: start}); err == nil {
		t.Error("a seed both trained and held out was accepted")
	}
}

// TestPressureYAMLRoundTrip: the section the tuner prints is a valid
// pressure section giving back the same parameters.
func TestPressureYAMLRoundTrip(t *testing.T) {
	pp := policy.DefaultPressureParams()
	pp.Weights[telemetry.SigKV], pp.Norm.QueueFull, pp.Projector.Hysteresis = 0.125, 0.25, 20
	pp.Norm.BusyKnee, pp.Sticky.MoveScore, pp.Sticky.RePrefillTPS, pp.Sticky.TTL = 0.3, 0.7, 5000, 45*time.Second
	pp.Burst.Window, pp.Burst.FalseAlarms, pp.Burst.Hold, pp.Burst.Hysteresis = 250*time.Millisecond, 2.5, 1500*time.Millisecond, 4
	doc := strings.Replace(PressureYAML(pp), "pressure:\n", "", 1)
	doc = strings.ReplaceAll(doc, "\n  ", "\n")[2:] // the section's contents, as a --pressure file holds them
	got, err := config.ParsePressure("tuned section", []byte(doc))
	if err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	if got != pp {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, pp)
	}
}

// TestTunePressure runs the tuning search of docs/pressure.md:
//
//	go test ./study -run TestTunePressure -tune -tune-out out/tune -v -timeout 2h -tune-seeds 20 -tune-rounds 1
//
// training seeds 11 to 10+N (-tune-seeds, 20 by default), held-out seeds 1-5 (the resilience study's), from
// the untuned values (policy.UntunedPressureParams). It prints the resulting pressure section.
func TestTunePressure(t *testing.T) {
	if !*tuneFlag {
		t.Skip("the tuning search runs with -tune")
	}
	var train []uint64
	for s := range *tuneN {
		train = append(train, uint64(11+s))
	}
	res, err := TunePressure(context.Background(), TuneOptions{Train: train, Test: []uint64{1, 2, 3, 4, 5}, Rounds: *tuneR,
		Start: policy.UntunedPressureParams(), Log: func(s string) { t.Log(s) }})
	if err != nil {
		t.Fatal(err)
	}
	md := TuneMarkdown(res)
	t.Log("\n" + md + "\n" + PressureYAML(res.Tuned))
	if *tuneOut == "" {
		return
	}
	if err := os.MkdirAll(*tuneOut, 0o755); err != nil {
		t.Fatal(err)
	}
	js, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tune.json": js, "pressure.yaml": []byte(PressureYAML(res.Tuned)), "tune.md": []byte(md)} {
		if err := os.WriteFile(filepath.Join(*tuneOut, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWeightChangeRate counts "weights" marks in a window, per second.
func TestWeightChangeRate(t *testing.T) {
	s := time.Second
	marks := []sim.Mark{{At: s, What: "weights"}, {At: 2 * s, What: "fault:burst"}, {At: 3 * s, What: "weights"}, {At: 5 * s, What: "weights"}}
	if got := WeightChangeRate(marks, 0, 4*s); got != 0.5 {
		t.Errorf("rate %v over [0,4s), want 0.5 (2 changes)", got)
	}
	if got := WeightChangeRate(marks, 5*s, 5*s); got != 0 {
		t.Errorf("rate %v over an empty window, want 0", got)
	}
}

var burstFlag = flag.Bool("burst-figures", false, "print the burst phase's routing figures for pressure (TestBurstFigures)")

// TestBurstFigures prints the burst phase's routing reaction and weight
// change rates for pressure with its defaults, at the phase's 50 sessions
// per burst and at 1,500, enough to overflow every backend's slots (BENCHMARKS.md):
//
//	go test ./study -run TestBurstFigures -burst-figures -v
func TestBurstFigures(t *testing.T) {
	if !*burstFlag {
		t.Skip("runs with -burst-figures")
	}
	for _, size := range []int{50, 1500} {
		figs, err := BurstPhaseFigures(context.Background(), "pressure", nil, []uint64{1, 2, 3, 4, 5}, size)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range figs {
			t.Logf("burst of %d sessions, seed %d: reaction p95 %.3f s, weight changes %.2f/s in the 30 s before the first burst, %.2f/s in the 2 s after each burst",
				size, f.Seed, f.ReactS, f.QuietRate, f.BurstRate)
		}
	}
}
