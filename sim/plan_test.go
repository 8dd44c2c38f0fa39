package sim

import "testing"

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
