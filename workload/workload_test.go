package workload

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestSessionsGrow(t *testing.T) {
	c := DefaultConfig()
	s := c.NewSession(1, 42)
	if s.Turns < 5 || s.Turns > 40 {
		t.Fatalf("turns = %d, want 5..40", s.Turns)
	}
	prev := Turn{PromptTokens: 0, OutputTokens: 0}
	n := 0
	for turn, ok := s.Next(); ok; turn, ok = s.Next() {
		if turn.Index != n {
			t.Fatalf("turn index %d, want %d", turn.Index, n)
		}
		added := turn.PromptTokens - prev.PromptTokens - prev.OutputTokens
		if n == 0 {
			added -= c.SystemPromptTokens
		}
		if added < 200 || added > 2000 || turn.OutputTokens < 128 || turn.OutputTokens > 256 {
			t.Fatalf("turn %d adds %d user tokens and asks %d output", n, added, turn.OutputTokens)
		}
		prev = turn
		n++
	}
	if n != s.Turns {
		t.Errorf("got %d turns, want %d", n, s.Turns)
	}
	// Same seed and id, same session.
	a, b := c.NewSession(1, 42), c.NewSession(1, 42)
	for range a.Turns {
		ta, _ := a.Next()
		tb, _ := b.Next()
		if ta != tb || a.ThinkTime() != b.ThinkTime() {
			t.Fatal("same seed gave different sessions")
		}
	}
}

// TestSessionByValue: a session started in place (StartSession) is the
// one NewSession returns, and a copy holds its own stream: drawing from
// the copy leaves the original where it was.
func TestSessionByValue(t *testing.T) {
	c := DefaultConfig()
	var in Session
	if in.Started() {
		t.Fatal("the zero Session says it was started")
	}
	c.StartSession(&in, 7, 3)
	if !in.Started() {
		t.Fatal("StartSession left the session not started")
	}
	ref := c.NewSession(7, 3)
	if in.Turns != ref.Turns {
		t.Fatalf("StartSession: %d turns, NewSession %d", in.Turns, ref.Turns)
	}
	first, _ := in.Next()
	if r, _ := ref.Next(); first != r || in.ThinkTime() != ref.ThinkTime() {
		t.Fatal("StartSession and NewSession drew different first turns")
	}
	cp := in
	cpTurn, _ := cp.Next()
	cpThink := cp.ThinkTime()
	if got, _ := in.Next(); got != cpTurn || in.ThinkTime() != cpThink {
		t.Fatal("the original did not draw what its copy drew: the two share a stream")
	}
}

func TestMeansMatchConfig(t *testing.T) {
	c := DefaultConfig()
	var turns, user, think float64
	const sessions = 20_000
	for id := range uint64(sessions) {
		s := c.NewSession(7, id)
		turns += float64(s.Turns)
		t0, _ := s.Next()
		user += float64(t0.PromptTokens - c.SystemPromptTokens)
		think += s.ThinkTime().Seconds()
	}
	for _, tt := range []struct {
		name      string
		got, want float64
	}{
		{"turns", turns / sessions, 22.5},
		{"user tokens", user / sessions, 1100},
		{"think time", think / sessions, 5},
	} {
		if math.Abs(tt.got-tt.want)/tt.want > 0.03 {
			t.Errorf("mean %s = %.3f, want %.3f within 3%%", tt.name, tt.got, tt.want)
		}
	}
	a, err := NewArrivals(c.SessionRate(450), rand.New(rand.NewPCG(1, 1)))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Duration(0)
	for range 20_000 {
		now = a.Next(now)
	}
	if rate := 20_000 / now.Seconds(); math.Abs(rate-20)/20 > 0.03 {
		t.Errorf("session rate %.2f/s, want 20/s (450 req/s / 22.5 turns)", rate)
	}
}

func TestValidate(t *testing.T) {
	bad := DefaultConfig()
	bad.TurnsMin, bad.TurnsMax = 10, 5
	if bad.Validate() == nil {
		t.Error("turns min > max accepted")
	}
	if DefaultConfig().Validate() != nil {
		t.Error("default config rejected")
	}
	if _, err := NewArrivals(0, nil); err == nil {
		t.Error("zero rate accepted")
	}
}
