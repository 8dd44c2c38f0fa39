package router

import (
	"testing"
	"time"

	"github.com/stargate-llm/stargate/policy"
)

// TestOverloadShare: overload refusals (503/429) raise a backend's
// View.Overload at once, answers that succeed lower it, and it fades with
// DefaultOverloadHalfLife; the error rate does not count them.
func TestOverloadShare(t *testing.T) {
	r := newRouterWith(t, "pressure", 2, Config{})
	if r.Views()[0].Overload != 0 {
		t.Fatalf("overload share %v before any answer", r.Views()[0].Overload)
	}
	r.OnResult(time.Second, 0, Result{Kind: Overloaded})
	r.OnResult(time.Second, 0, Result{Kind: Overloaded})
	hit := r.Views()[0].Overload
	if hit < 0.5 || r.Views()[1].Overload != 0 || r.Views()[0].ErrorRate != 0 {
		t.Fatalf("after two 503s: overload %v (want >= 0.5), other backend %v, error rate %v (want 0)", hit, r.Views()[1].Overload, r.Views()[0].ErrorRate)
	}
	r.OnResult(time.Second, 0, Result{Kind: Succeeded})
	if ok := r.Views()[0].Overload; ok >= hit {
		t.Errorf("a success left the overload share at %v (was %v)", ok, hit)
	}
	before := r.Views()[0].Overload
	r.Route(time.Second+3*DefaultOverloadHalfLife, 1, Ask{Session: 7})
	if later := r.Views()[0].Overload; later > before/2 {
		t.Errorf("overload share %v three half-lives later, want at most %v", later, before/2)
	}
	// The pressure policy's weight drops with it, before any report.
	fresh := newRouterWith(t, "pressure", 2, Config{})
	for range 3 {
		fresh.OnResult(0, 1, Result{Kind: Overloaded})
	}
	ws := policy.WeightsOf(fresh.Policy(), fresh.Views())
	if ws[1].Weight >= ws[0].Weight {
		t.Errorf("weights %d (quiet) and %d (refusing), want the refusing backend lower", ws[0].Weight, ws[1].Weight)
	}
}

// TestOverloadShareFadesWithoutSuccess: a backend that has only refused
// (at start, or in a burst over the whole fleet) sees its overload share
// fade with time, although no answer ever succeeded.
func TestOverloadShareFadesWithoutSuccess(t *testing.T) {
	r := newRouterWith(t, "pressure", 2, Config{})
	r.OnResult(0, 0, Result{Kind: Overloaded})
	hit := r.Views()[0].Overload
	r.Route(5*DefaultOverloadHalfLife, 1, Ask{Session: 7})
	if later := r.Views()[0].Overload; hit <= 0 || later > hit/16 {
		t.Errorf("overload share %v five half-lives after %v, want at most %v", later, hit, hit/16)
	}
}
