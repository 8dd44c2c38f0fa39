package auth

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// clone returns a second copy of a signed request, body and all, as an
// attacker who captured it would send it.
func clone(t *testing.T, req *http.Request) (*http.Request, *http.Request) {
	t.Helper()
	raw, err := io.ReadAll(req.Body)
	if err != nil {
		t.Fatal(err)
	}
	copy2 := req.Clone(req.Context())
	req.Body, copy2.Body = io.NopCloser(bytes.NewReader(raw)), io.NopCloser(bytes.NewReader(raw))
	return req, copy2
}

func rejectedFor(t *testing.T, err error, reason string) {
	t.Helper()
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("err = %v, want a rejection for %s", err, reason)
	}
}

// TestSecurityAudienceBound (issue 19, observation 5): a signed drain that
// one router replica accepted is refused by another replica, and by
// another service, even within the timestamp window.
func TestSecurityAudienceBound(t *testing.T) {
	op := Key{ID: "op-1", Role: RoleOperator, Secret: []byte("operator-secret-0123456789")}
	r1 := NewVerifier("router/r1", DefaultMaxSkew, op)
	r2 := NewVerifier("router/r2", DefaultMaxSkew, op)
	gw := NewVerifier("gateway/r1", DefaultMaxSkew, op)
	req, err := NewSigner(op, "operator").NewRequest("router/r1", http.MethodPost, "http://r/admin/backends/a/drain", nil)
	if err != nil {
		t.Fatal(err)
	}
	first, rest := clone(t, req)
	rest, third := clone(t, rest)
	if _, msg, err := r1.Verify(first, 1<<10, RoleOperator); err != nil || msg.KeyID != "op-1" || msg.Role != RoleOperator {
		t.Fatalf("the addressed replica: %+v, %v", msg, err)
	}
	_, _, err = r2.Verify(rest, 1<<10, RoleOperator)
	rejectedFor(t, err, ReasonAudience)
	_, _, err = gw.Verify(third, 1<<10, RoleOperator)
	rejectedFor(t, err, ReasonAudience)
}

// TestSecurityRolesApart: a key of one role cannot sign another role's
// call: a gateway's key cannot drain, an operator's cannot send stats.
func TestSecurityRolesApart(t *testing.T) {
	gwKey := Key{ID: "gw-1", Role: RoleGateway, Secret: []byte("gateway-secret-0123456789")}
	opKey := Key{ID: "op-1", Role: RoleOperator, Secret: []byte("operator-secret-0123456789")}
	v := NewVerifier("router/r1", DefaultMaxSkew, gwKey, opKey)
	drain, _ := NewSigner(gwKey, "backend-b").NewRequest("router/r1", http.MethodPost, "http://r/admin/backends/a/drain", nil)
	_, _, err := v.Verify(drain, 1<<10, RoleOperator)
	rejectedFor(t, err, ReasonRole)
	stats, _ := NewSigner(opKey, "backend-b").NewRequest("router", http.MethodPost, "http://r/v1/stargate/stats", []byte("{}"))
	_, _, err = v.VerifyService(stats, 1<<10, RoleGateway)
	rejectedFor(t, err, ReasonRole)
	// The whole service as audience is for stats (VerifyService) only.
	ok, _ := NewSigner(gwKey, "backend-b").NewRequest("router", http.MethodPost, "http://r/v1/stargate/stats", []byte("{}"))
	ok, again := clone(t, ok)
	if _, _, err := v.VerifyService(ok, 1<<10, RoleGateway); err != nil {
		t.Fatal(err)
	}
	_, _, err = v.Verify(again, 1<<10, RoleGateway)
	rejectedFor(t, err, ReasonAudience)
}

// TestSecurityKeyRotation: with two operator keys active, calls signed with
// either pass; a signer takes the last key of its role; once the old key
// leaves the file, its signatures are refused.
func TestSecurityKeyRotation(t *testing.T) {
	const before = "operator op-2025 old-operator-secret-0123\nrouter r-2025 router-secret-0123456789\n"
	const during = before + "operator op-2026 new-operator-secret-0123\n"
	const after = "router r-2025 router-secret-0123456789\noperator op-2026 new-operator-secret-0123\n"
	ring := func(text string) *Keyring {
		k, err := ReadKeyring(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	sign := func(text string) *http.Request {
		k, ok := ring(text).Signing(RoleOperator)
		if !ok {
			t.Fatal("no operator key")
		}
		req, _ := NewSigner(k, "operator").NewRequest("router/r1", http.MethodPost, "http://r/admin/backends/a/drain", nil)
		return req
	}
	verify := func(text string, req *http.Request) error {
		_, _, err := NewVerifier("router/r1", DefaultMaxSkew, ring(text).Keys()...).Verify(req, 1<<10, RoleOperator)
		return err
	}
	if k, _ := ring(during).Signing(RoleOperator); k.ID != "op-2026" {
		t.Fatalf("signing key %q, want the last operator key op-2026", k.ID)
	}
	if err := verify(during, sign(before)); err != nil {
		t.Errorf("old key during rotation: %v", err)
	}
	if err := verify(during, sign(during)); err != nil {
		t.Errorf("new key during rotation: %v", err)
	}
	rejectedFor(t, verify(after, sign(before)), ReasonUnknownID)
	if err := verify(after, sign(after)); err != nil {
		t.Errorf("new key after rotation: %v", err)
	}
}

func TestReadKeyring(t *testing.T) {
	good := "# role id secret\nrouter r1 0123456789abcdef\n\ngateway g1 0123456789abcdef\noperator o1 0123456789abcdef\n"
	k, err := ReadKeyring(strings.NewReader(good))
	if err != nil || len(k.Keys()) != 3 || k.Legacy() {
		t.Fatalf("ReadKeyring: %v %+v", err, k)
	}
	legacy, err := ReadKeyring(strings.NewReader("k1:0123456789abcdef\n"))
	if err != nil || !legacy.Legacy() {
		t.Fatalf("one-key format: %v", err)
	}
	for _, bad := range []string{"", "# only\n", "admin a1 0123456789abcdef\n", "router r1 short\n",
		"router r1 0123456789abcdef\nrouter r1 0123456789abcdef\n", "router r1 0123456789abcdef extra\n",
		"k1:0123456789abcdef\nrouter r1 0123456789abcdef\n"} {
		if _, err := ReadKeyring(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadKeyring(%q) accepted", bad)
		}
	}
}

func FuzzReadKeyring(f *testing.F) {
	f.Add("router r1 0123456789abcdef\n")
	f.Add("k1:0123456789abcdef")
	f.Fuzz(func(t *testing.T, text string) {
		k, err := ReadKeyring(strings.NewReader(text))
		if err == nil && len(k.Keys()) == 0 {
			t.Fatal("accepted a file with no key")
		}
	})
}

// TestCheckWindow: data-plane requests may arrive out of order, each once,
// up to replayWindow sequence numbers below the highest.
func TestCheckWindow(t *testing.T) {
	k := Key{ID: "r", Role: RoleRouter, Secret: []byte("router-secret-0123456789")}
	v := NewVerifier("gateway/g1", DefaultMaxSkew, k)
	s := NewSigner(k, "router-1")
	n := replayWindow + 200
	reqs := make([]*http.Request, n)
	for i := range n {
		reqs[i], _ = s.NewRequest("gateway/g1", http.MethodPost, "http://g/v1/chat/completions", []byte("{}"))
	}
	check := func(i int) error { _, err := v.Check(reqs[i], []byte("{}"), RoleRouter); return err }
	for _, i := range []int{5, 2, 3, 79} {
		if err := check(i); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	for _, i := range []int{5, 2, 79, 3} {
		rejectedFor(t, check(i), ReasonReplay)
	}
	if err := check(20); err != nil { // 59 below the highest: in the window
		t.Fatalf("request 20: %v", err)
	}
	// 200 concurrent streams signed in order arrive in reverse: every one
	// is taken once, none twice.
	for i := 1000; i >= 800; i-- {
		if err := check(i); err != nil {
			t.Fatalf("request %d after %d: %v", i, i+1, err)
		}
	}
	rejectedFor(t, check(900), ReasonReplay)
	top := n - 1
	if err := check(top); err != nil {
		t.Fatal(err)
	}
	if err := check(top - replayWindow + 1); err != nil { // the oldest in the window
		t.Fatalf("request %d, %d below the highest: %v", top-replayWindow+1, replayWindow-1, err)
	}
	rejectedFor(t, check(top-replayWindow), ReasonReplay) // just out of it: too old
	rejectedFor(t, check(1000), ReasonReplay)             // in the window, and seen
}

// BenchmarkSignCheck is the data-plane cost of a router's signature: one
// sign and one check of a 4 KiB body.
func BenchmarkSignCheck(b *testing.B) {
	k := Key{ID: "r", Role: RoleRouter, Secret: []byte("router-secret-0123456789")}
	v := NewVerifier("gateway/g1", DefaultMaxSkew, k)
	s := NewSigner(k, "router-1")
	body := bytes.Repeat([]byte("x"), 4096)
	req, _ := http.NewRequest(http.MethodPost, "http://g/v1/chat/completions", nil)
	b.ReportAllocs()
	for b.Loop() {
		s.Sign(req, body, "gateway/g1")
		if _, err := v.Check(req, body, RoleRouter); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSecurityReplayAfterRestart: a signed drain that a router accepted is
// refused by the same router restarted (same id, a fresh verifier, its
// sequence memory gone) even while the timestamp is within the window; a
// call signed after the restart passes, and so does one from a signer
// whose clock is behind by less than StartSkew.
func TestSecurityReplayAfterRestart(t *testing.T) {
	op := Key{ID: "op-1", Role: RoleOperator, Secret: []byte("operator-secret-0123456789")}
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) func() time.Time { return func() time.Time { return t0.Add(d) } }
	started := func(start, now time.Duration) *Verifier {
		v := NewVerifier("router/r1", DefaultMaxSkew, op)
		v.start, v.now = t0.Add(start), at(now)
		return v
	}
	sign := func(clock time.Duration) *http.Request {
		s := NewSigner(op, "operator")
		s.now = at(clock)
		req, err := s.NewRequest("router/r1", http.MethodPost, "http://r/admin/backends/a/drain", nil)
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	first, captured := clone(t, sign(2*time.Second))
	if _, _, err := started(0, 2*time.Second).Verify(first, 1<<10, RoleOperator); err != nil {
		t.Fatalf("before the restart: %v", err)
	}
	// Restarted at 3 s; the replay comes at 4 s, 2 s after signing (the
	// window is 5 s).
	restarted := started(3*time.Second, 4*time.Second)
	_, _, err := restarted.Verify(captured, 1<<10, RoleOperator)
	rejectedFor(t, err, ReasonStale)
	if _, _, err := restarted.Verify(sign(4*time.Second), 1<<10, RoleOperator); err != nil {
		t.Fatalf("a call signed after the restart: %v", err)
	}
	// A signer whose clock is 300 ms behind, right after the restart.
	if _, _, err := started(3*time.Second, 3*time.Second).Verify(sign(3*time.Second-300*time.Millisecond), 1<<10, RoleOperator); err != nil {
		t.Fatalf("a clock behind by less than StartSkew: %v", err)
	}
	// Further behind: refused until its clock passes the start; it retries.
	_, _, err = started(3*time.Second, 3*time.Second).Verify(sign(time.Second), 1<<10, RoleOperator)
	rejectedFor(t, err, ReasonStale)
}

// TestRestartLeavesDataPlane: the data plane (Check) is not held to the
// start: a router's request signed just before a gateway restarted is
// served after it (docs/security.md says why).
func TestRestartLeavesDataPlane(t *testing.T) {
	k := Key{ID: "r", Role: RoleRouter, Secret: []byte("router-secret-0123456789")}
	t0 := time.Unix(1_800_000_000, 0)
	v := NewVerifier("gateway/g1", DefaultMaxSkew, k)
	v.start, v.now = t0, func() time.Time { return t0.Add(time.Second) }
	s := NewSigner(k, "router-1")
	s.now = func() time.Time { return t0.Add(-2 * time.Second) }
	req, _ := s.NewRequest("gateway/g1", http.MethodPost, "http://g/v1/chat/completions", []byte("{}"))
	if _, err := v.Check(req, []byte("{}"), RoleRouter); err != nil {
		t.Fatalf("data plane across a restart: %v", err)
	}
}
