package client

import (
	"testing"
	"time"

	"github.com/stargate-llm/stargate/metrics"
)

func TestRetriesThenFails(t *testing.T) {
	c := DefaultConfig()
	turn := c.NewTurn(time.Second, metrics.TurnRecord{Session: 1})
	if dl := turn.Attempt(time.Second); dl != 31*time.Second {
		t.Fatalf("deadline %v, want 31s", dl)
	}
	at, retry := turn.Fail(2*time.Second, Rejected, 3)
	if !retry || at != 2100*time.Millisecond {
		t.Fatalf("first failure: retry %v at %v, want true at 2.1s", retry, at)
	}
	turn.Attempt(at)
	if at, retry = turn.Fail(3*time.Second, TimedOut, -1); !retry || at != 3200*time.Millisecond {
		t.Fatalf("second failure: retry %v at %v, want true at 3.2s", retry, at)
	}
	turn.Attempt(at)
	if _, retry = turn.Fail(4*time.Second, Rejected, 4); retry || !turn.Done() {
		t.Fatal("third failure must end the turn")
	}
	r := turn.Record
	if r.Completed || r.Attempts != 3 || r.Rejections != 2 || r.Reason != "overloaded" || r.End != 4*time.Second || r.Backend != 4 {
		t.Errorf("record = %+v", r)
	}
}

func TestTTFTFromFirstAttempt(t *testing.T) {
	c := DefaultConfig()
	turn := c.NewTurn(0, metrics.TurnRecord{})
	turn.Attempt(0)
	turn.FirstToken(time.Second) // a token, then the attempt fails
	turn.Fail(2*time.Second, Errored, 0)
	turn.Attempt(2 * time.Second)
	turn.FirstToken(9 * time.Second)
	turn.Complete(12*time.Second, 5, 100, 128)
	r := turn.Record
	if r.TTFT() != 9*time.Second || !r.Good(c.TTFTSLO) || r.Backend != 5 {
		t.Errorf("TTFT %v good %v backend %d, want 9s, true, 5", r.TTFT(), r.Good(c.TTFTSLO), r.Backend)
	}
	bad := c
	bad.MaxAttempts = 0
	if bad.Validate() == nil {
		t.Error("zero attempts accepted")
	}
}

func TestInvalidIsNotRetried(t *testing.T) {
	c := DefaultConfig()
	turn := c.NewTurn(0, metrics.TurnRecord{})
	turn.Attempt(0)
	if _, retry := turn.Fail(0, Invalid, 2); retry || !turn.Done() || turn.Record.Reason != "invalid" {
		t.Errorf("an invalid request was retried or not recorded: %+v", turn.Record)
	}
	turn = c.NewTurn(0, metrics.TurnRecord{})
	turn.Attempt(0)
	if _, retry := turn.Fail(0, Errored, 2); !retry {
		t.Error("a server error was not retried")
	}
}
