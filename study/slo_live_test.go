package study

import (
	"context"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/workload"
)

// TestLiveRunnerStep runs one short step live and the same step in the
// simulator: both sample the requests the class sends in the window, and a
// light load passes the class's tier-2 SLO in both.
func TestLiveRunnerStep(t *testing.T) {
	if testing.Short() {
		t.Skip("live fleet")
	}
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
	if live.Sent != simulated.Sent || live.Sent < 14 || live.Sent > 16 {
		t.Fatalf("sent: live %d, sim %d; want the same 15 or so", live.Sent, simulated.Sent)
	}
	slo := class.Tiers[1]
	if !live.Sustains(slo, 0.95) || !simulated.Sustains(slo, 0.95) || live.Events != 0 || live.WallS < 5 {
		t.Fatalf("live %+v\nsim %+v", live, simulated)
	}
	if len(logged) != 1 {
		t.Fatalf("log %q", logged)
	}
}
