package router

import (
	"testing"

	"github.com/stargate-llm/stargate/policy"
)

// TestRetryRule walks the retry rule through each kind of refusal.
func TestRetryRule(t *testing.T) {
	for _, tt := range []struct {
		name string
		max  int
		ref  Refusal
		want Step
	}{
		{"refused connection", 3, Refusal{Kind: Errored, NeverSent: true}, Step{Report: true, Undispatch: true, Disable: true, Again: true}},
		{"broken connection", 3, Refusal{Kind: Errored}, Step{Report: true, Again: true}},
		{"overloaded", 3, Refusal{Kind: Overloaded}, Step{Report: true, Again: true}},
		{"too long, another fits, counted", 3, Refusal{Kind: TooLong, OthersFit: true}, Step{Report: true, Again: true}},
		{"too long, another fits, uncounted", 3, Refusal{Kind: TooLong, OthersFit: true, Uncounted: true}, Step{Report: true, Undispatch: true, Again: true}},
		{"too long, none fits", 3, Refusal{Kind: TooLong, Uncounted: true}, Step{Undispatch: true}},
		{"last attempt", 1, Refusal{Kind: Overloaded}, Step{Report: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rt := NewRetry(tt.max, nil)
			if got := rt.Refused(4, tt.ref); got != tt.want {
				t.Errorf("step %+v, want %+v", got, tt.want)
			}
			if rt.Tried() != 1 || len(rt.Exclude()) != 1 || rt.Exclude()[0] != 4 {
				t.Errorf("tried %d, exclude %v; want 1 and [4]", rt.Tried(), rt.Exclude())
			}
		})
	}
}

// TestRetryBudgetAndAccept: skipped backends are excluded but cost no
// attempt; a dispatch to a skipped or tried backend is refused; the budget
// counts refusals.
func TestRetryBudgetAndAccept(t *testing.T) {
	skip := []BackendID{9}
	rt := NewRetry(2, skip)
	if !rt.Accept(Decision{Kind: policy.Dispatch, Backend: 1}) || rt.Accept(Decision{Kind: policy.Dispatch, Backend: 9}) {
		t.Error("accept before any refusal")
	}
	if !rt.Accept(Decision{Kind: policy.Wait, Backend: 9}) || !rt.Accept(Decision{Kind: policy.Reject, Backend: NoBackend}) {
		t.Error("only dispatches are checked")
	}
	if st := rt.Refused(1, Refusal{Kind: Overloaded}); !st.Again {
		t.Error("first of two attempts refused: no retry")
	}
	if rt.Accept(Decision{Kind: policy.Dispatch, Backend: 1}) {
		t.Error("a dispatch to a backend that refused was accepted")
	}
	if st := rt.Refused(2, Refusal{Kind: Overloaded}); st.Again {
		t.Error("retried past the budget")
	}
	if got := rt.Exclude(); len(got) != 3 || got[0] != 9 || got[1] != 1 || got[2] != 2 || rt.Tried() != 2 {
		t.Errorf("exclude %v tried %d", got, rt.Tried())
	}
	rt.Refused(3, Refusal{Kind: Overloaded})
	if skip[0] != 9 || len(skip) != 1 {
		t.Errorf("the caller's skip list changed: %v", skip)
	}
	if (&Retry{}).Refused(1, Refusal{Kind: Overloaded}).Again {
		t.Error("the zero Retry allowed an attempt")
	}
}
