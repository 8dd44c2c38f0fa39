package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

var testKey = Key{ID: "k1", Role: RoleGateway, Secret: []byte("0123456789abcdef0123")}

const self = "router/r1"

func signed(t *testing.T, s *Signer, body string) *http.Request {
	t.Helper()
	req, err := s.NewRequest(self, http.MethodPost, "http://router/v1/stargate/stats", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		name   string
		mutate func(r *http.Request)
		signer Key
		clock  time.Duration // signer clock offset
		reason string
	}{
		{name: "good", signer: testKey},
		{name: "tampered body", signer: testKey, reason: ReasonSignature, mutate: func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(`{"active":0}`))
		}},
		{name: "tampered path", signer: testKey, reason: ReasonSignature, mutate: func(r *http.Request) { r.URL.Path = "/admin/drain" }},
		{name: "other secret", signer: Key{ID: "k1", Role: RoleGateway, Secret: []byte("another-secret-of-20")}, reason: ReasonSignature},
		{name: "unknown key id", signer: Key{ID: "k9", Role: RoleGateway, Secret: testKey.Secret}, reason: ReasonUnknownID},
		{name: "role not in the signed string", signer: Key{ID: "k1", Role: RoleOperator, Secret: testKey.Secret}, reason: ReasonSignature},
		{name: "other audience", signer: testKey, reason: ReasonAudience, mutate: func(r *http.Request) { r.Header.Set(HeaderAudience, "router/r2") }},
		{name: "version 1", signer: testKey, reason: ReasonVersion, mutate: func(r *http.Request) { r.Header.Del(HeaderVersion) }},
		{name: "missing header", signer: testKey, reason: ReasonMissing, mutate: func(r *http.Request) { r.Header.Del(HeaderSeq) }},
		{name: "clock ahead", signer: testKey, clock: 6 * time.Second, reason: ReasonSkew},
		{name: "clock behind", signer: testKey, clock: -6 * time.Second, reason: ReasonSkew},
		{name: "small skew", signer: testKey, clock: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := NewVerifier(self, DefaultMaxSkew, testKey)
			v.now = func() time.Time { return now }
			v.start = now.Add(-time.Minute) // started well before the messages
			s := NewSigner(tt.signer, "gw-a")
			s.now = func() time.Time { return now.Add(tt.clock) }
			req := signed(t, s, `{"active":3}`)
			if tt.mutate != nil {
				tt.mutate(req)
			}
			body, msg, err := v.Verify(req, 1<<20, RoleGateway)
			if tt.reason == "" {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				if string(body) != `{"active":3}` || msg.Sender != "gw-a" || msg.Seq != 1 {
					t.Fatalf("got body %q msg %+v", body, msg)
				}
				return
			}
			if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), tt.reason) {
				t.Fatalf("err = %v, want a rejection for %s", err, tt.reason)
			}
			if _, rej := v.Counts(); rej[tt.reason] != 1 {
				t.Fatalf("rejected counts %v, want one %s", rej, tt.reason)
			}
		})
	}
}

func TestReplayAndBoots(t *testing.T) {
	v := NewVerifier(self, DefaultMaxSkew, testKey)
	s := NewSigner(testKey, "gw-a")
	first := signed(t, s, "a")
	raw, _ := io.ReadAll(first.Body)
	replay := first.Clone(first.Context())
	first.Body, replay.Body = io.NopCloser(bytes.NewReader(raw)), io.NopCloser(bytes.NewReader(raw))
	second := signed(t, s, "b")
	if _, _, err := v.Verify(second, 1<<10, RoleGateway); err != nil {
		t.Fatal(err)
	}
	// The earlier message arrives late: its sequence is no longer above the last.
	if _, _, err := v.Verify(first, 1<<10, RoleGateway); err == nil || !strings.Contains(err.Error(), ReasonReplay) {
		t.Fatalf("late message: err = %v, want replay", err)
	}
	if _, _, err := v.Verify(replay, 1<<10, RoleGateway); err == nil {
		t.Fatal("replayed message accepted")
	}
	// A restarted sender has a new boot id and starts again at 1.
	if _, msg, err := v.Verify(signed(t, NewSigner(testKey, "gw-a"), "c"), 1<<10, RoleGateway); err != nil || msg.Seq != 1 {
		t.Fatalf("new boot: %v %+v", err, msg)
	}
	acc, rej := v.Counts()
	if acc != 2 || rej[ReasonReplay] != 2 {
		t.Fatalf("accepted %d rejected %v", acc, rej)
	}
}

func TestBodyLimit(t *testing.T) {
	v := NewVerifier(self, DefaultMaxSkew, testKey)
	if _, _, err := v.Verify(signed(t, NewSigner(testKey, "g"), strings.Repeat("x", 100)), 99, RoleGateway); err == nil || !strings.Contains(err.Error(), ReasonBody) {
		t.Fatalf("err = %v", err)
	}
}

func TestParseKey(t *testing.T) {
	for _, tt := range []struct {
		in, id string
		ok     bool
	}{
		{"k1:0123456789abcdef", "k1", true},
		{"  0123456789abcdef\n", "default", true},
		{"k1:short", "", false},
		{":0123456789abcdef", "", false},
		{"", "", false},
	} {
		k, err := ParseKey(tt.in)
		if (err == nil) != tt.ok || (tt.ok && k.ID != tt.id) {
			t.Errorf("ParseKey(%q) = %+v, %v", tt.in, k, err)
		}
	}
}

func TestAPIKeys(t *testing.T) {
	hashed := sha256.Sum256([]byte("hashed-client-key"))
	keys, err := ReadAPIKeys(strings.NewReader("# clients\nplain-client-key-1\n\nsha256:" + hex.EncodeToString(hashed[:]) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		header string
		ok     bool
	}{
		{"Bearer plain-client-key-1", true},
		{"Bearer plain-client-key-2", false},
		{"Bearer hashed-client-key", true},
		{"plain-client-key-1", false},
		{"Bearer ", false},
		{"", false},
	} {
		req, _ := http.NewRequest(http.MethodGet, "/", nil)
		if tt.header != "" {
			req.Header.Set("Authorization", tt.header)
		}
		if got := keys.Allowed(req); got != tt.ok {
			t.Errorf("Allowed(%q) = %v", tt.header, got)
		}
	}
	for _, bad := range []string{"", "# only a comment\n", "short\n", "sha256:zz\n"} {
		if _, err := ReadAPIKeys(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadAPIKeys(%q) accepted", bad)
		}
	}
}
