package sim

import (
	"testing"

	"github.com/stargate-llm/stargate/metrics"
)

// TestSessionPlanMatchesRun checks that the plan replays the simulator's own
// sessions: every measured first turn starts when its planned session
// arrives, from its planned router, with its planned prompt.
func TestSessionPlanMatchesRun(t *testing.T) {
	cfg := small("waw", 20)
	cfg.KeepRecords = true
	res := run(t, cfg)
	plan, err := NewSessionPlan(cfg)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[uint64]PlannedSession{}
	for {
		ps := plan.Next()
		if ps.At >= cfg.Warmup+cfg.Measure {
			break
		}
		byID[ps.ID] = ps
	}
	checked := 0
	for _, r := range res.Records {
		if r.Turn != 0 {
			continue
		}
		ps, ok := byID[r.Session]
		if !ok {
			t.Fatalf("session %d: not in the plan", r.Session)
		}
		first, _ := ps.Session.Next()
		if r.Start != ps.At || r.Router != ps.Router || r.Region != ps.Region || r.PromptTokens != first.PromptTokens {
			t.Fatalf("session %d: run start %v router %d region %d prompt %d, plan %v, %d, %d, %d",
				r.Session, r.Start, r.Router, r.Region, r.PromptTokens, ps.At, ps.Router, ps.Region, first.PromptTokens)
		}
		checked++
	}
	if checked < 10 {
		t.Fatalf("only %d first turns checked", checked)
	}
}

func TestSessionPlanRefusesOtherModes(t *testing.T) {
	cfg := small("waw", 20)
	cfg.Clients = 10
	if _, err := NewSessionPlan(cfg); err == nil {
		t.Fatal("a closed loop has no session plan, want an error")
	}
}

// TestLiveSessionKeys: with live keys the run plays the same sessions, names
// them by id in the records, and routes them by the live key, so that
// affinity places them differently from the id keys.
func TestLiveSessionKeys(t *testing.T) {
	cfg := small("waw", 20)
	cfg.KeepRecords = true
	byID := run(t, cfg)
	cfg.LiveSessionKeys = true
	byKey := run(t, cfg)
	starts := map[[2]uint64]metrics.TurnRecord{}
	for _, r := range byID.Records {
		starts[[2]uint64{r.Session, uint64(r.Turn)}] = r
	}
	matched, moved := 0, 0
	for _, r := range byKey.Records {
		o, ok := starts[[2]uint64{r.Session, uint64(r.Turn)}]
		if !ok || r.Turn != 0 {
			continue
		}
		matched++
		if r.Start != o.Start || r.PromptTokens != o.PromptTokens {
			t.Fatalf("session %d: first turn %+v with live keys, %+v without", r.Session, r, o)
		}
		if r.Backend != o.Backend {
			moved++
		}
	}
	if matched < 10 || moved == 0 {
		t.Fatalf("%d first turns matched by id, %d placed elsewhere: want many matched and some moved", matched, moved)
	}
}
