package study

import (
	"context"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/internal/slowtest"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/workload"
)

// TestLiveRunnerStep runs one short step live and the same step in the
// simulator: both sample the requests the class sends in the window, and a
// light load passes the class's tier-2 SLO in the simulator and fails no
// request live.
//
// The live figures move with the machine's load, so they are checked
// against bounds that load cannot break. The driver sends each request at
// its scheduled time or, when the process was held up, later (never
// earlier); so the requests sent in the live window are at most those
// scheduled before its end, although a stall can move requests of the
// warm-up into it (a loaded -race run once counted 18 against the
// simulator's 15). A live TTFT on a loaded machine says how busy the machine
// was, so the SLO verdict is the simulator's. Live, every sampled request is
// counted once and none may fail (each attempt has 30 s, far beyond this
// step); whether they complete within the 1 s cool-down depends on the load
// (on a machine at load average 30 none did), so that is not asserted here:
// the serve/fleet tests check completed requests without a window.
func TestLiveRunnerStep(t *testing.T) {
	slowtest.Skip(t, "live fleet")
	reg := policy.NewRegistry()
	fl, err := config.Load("three-site")
	if err != nil {
		t.Fatal(err)
	}
	class, err := workload.ClassByName("baseline_mixed")
	if err != nil {
		t.Fatal(err)
	}
	spec := StepSpec{Class: class, Policy: "pulsar-waw", Rate: 5, Seed: 1,
		Windows: Windows{Warmup: time.Second, Measure: 3 * time.Second, Cooldown: time.Second}}
	var logged []string
	live, err := (&LiveRunner{Fleet: fl, Registry: reg, Log: func(m string) { logged = append(logged, m) }}).Step(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	simulated, err := (&SimRunner{Fleet: fl, Registry: reg}).Step(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if simulated.Sent < 14 || simulated.Sent > 16 {
		t.Fatalf("sim sent %d in a 3 s window at 5 req/s; want 15 or so", simulated.Sent)
	}
	stream, err := class.Stream(spec.Rate, spec.Seed)
	if err != nil {
		t.Fatal(err)
	}
	scheduled := 0 // requests scheduled before the window's end
	for r := stream.Next(); class.Lead+r.At < class.Lead+spec.Warmup+spec.Measure; r = stream.Next() {
		scheduled++
	}
	if live.Sent < 1 || live.Sent > scheduled {
		t.Fatalf("live sent %d in the window; want 1 to %d (those scheduled before its end)", live.Sent, scheduled)
	}
	slo := class.Tiers[1]
	if !simulated.Sustains(slo, 0.95) {
		t.Fatalf("sim does not sustain %v: %+v", slo, simulated)
	}
	if live.Samples() != live.Sent || live.Failed != 0 || live.Events != 0 || live.WallS < 5 {
		t.Fatalf("live %+v\nsim %+v", live, simulated)
	}
	if len(logged) != 1 {
		t.Fatalf("log %q", logged)
	}
}
