package auth

import (
	"net/http"
	"testing"
	"time"
)

// TestSecurityBootFloodKeepsReplaysOut: a holder of one role's key (here a
// gateway's) signs messages from as many fresh boots as the verifier
// tracks. The verifier used to forget every sender then, so an operator's
// drain captured a moment before was taken a second time. It must refuse
// the replay, and take new boots again once the flood's messages are older
// than the timestamp window.
func TestSecurityBootFloodKeepsReplaysOut(t *testing.T) {
	op := Key{ID: "op-1", Role: RoleOperator, Secret: []byte("operator-secret-0123456789")}
	gw := Key{ID: "gw-1", Role: RoleGateway, Secret: []byte("gateway-secret-0123456789")}
	t0 := time.Unix(1_800_000_000, 0)
	clock := t0
	v := NewVerifier("router/r1", DefaultMaxSkew, op, gw)
	v.start, v.now = t0, func() time.Time { return clock }
	sign := func(k Key, sender, url string) *http.Request {
		s := NewSigner(k, sender)
		s.now = func() time.Time { return clock }
		req, err := s.NewRequest("router/r1", http.MethodPost, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	first, captured := clone(t, sign(op, "operator", "http://r/admin/backends/a/drain"))
	if _, _, err := v.Verify(first, 1<<10, RoleOperator); err != nil {
		t.Fatalf("the operator's drain: %v", err)
	}
	for range maxTracked { // bounded: one message per tracked pair
		_, _, _ = v.Verify(sign(gw, "gw-x", "http://r/v1/stargate/stats"), 1<<10, RoleGateway)
	}
	clock = t0.Add(time.Second) // the captured drain is still within the window
	_, _, err := v.Verify(captured, 1<<10, RoleOperator)
	rejectedFor(t, err, ReasonReplay)

	clock = t0.Add(DefaultMaxSkew + time.Second) // every message so far is out of the window
	if _, _, err := v.Verify(sign(gw, "gw-y", "http://r/v1/stargate/stats"), 1<<10, RoleGateway); err != nil {
		t.Fatalf("a new boot after the flood's messages expired: %v", err)
	}
	v.mu.Lock()
	n := len(v.last)
	v.mu.Unlock()
	if n > maxTracked {
		t.Fatalf("%d pairs tracked, more than %d", n, maxTracked)
	}
}
