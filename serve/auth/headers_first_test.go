package auth

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// countingBody records whether anything read it.
type countingBody struct {
	io.Reader
	read bool
}

func (b *countingBody) Read(p []byte) (int, error) { b.read = true; return b.Reader.Read(p) }
func (b *countingBody) Close() error               { return nil }

// TestSecurityHeadersBeforeBody: a request with signature headers that
// cannot be valid (a made-up signature alone, an unknown key, another
// service's audience, a timestamp out of the window) made the verifier
// read up to its limit of body (1 MiB of stats; a gateway's 8 MiB
// completion) before refusing it, so unauthenticated connections each held
// a body's worth of memory below the listener's large-body budget. It
// must be refused before a byte of its body is read, and a gateway must
// not wait for its body (NeedsBody false).
func TestSecurityHeadersBeforeBody(t *testing.T) {
	rk := Key{ID: "r-1", Role: RoleRouter, Secret: []byte("router-secret-0123456789")}
	gk := Key{ID: "g-1", Role: RoleGateway, Secret: []byte("gateway-secret-0123456789")}
	now := time.Unix(1_800_000_000, 0)
	v := NewVerifier("router/r1", DefaultMaxSkew, rk, gk)
	v.start, v.now = now.Add(-time.Minute), func() time.Time { return now }
	gwv := NewVerifier("gateway/gw-a", DefaultMaxSkew, rk)
	gwv.start, gwv.now = v.start, v.now
	signed := func(k Key, audience string, at time.Time) *http.Request {
		s := NewSigner(k, "x")
		s.now = func() time.Time { return at }
		req, err := s.NewRequest(audience, http.MethodPost, "http://r/v1/stargate/stats", []byte("{}"))
		if err != nil {
			t.Fatal(err)
		}
		return req
	}
	bare, err := http.NewRequest(http.MethodPost, "http://r/v1/stargate/stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	bare.Header.Set(HeaderSignature, "00")
	unknown := signed(gk, "router/r1", now)
	unknown.Header.Set(HeaderKeyID, "nobody")
	tests := []struct {
		name   string
		req    *http.Request
		reason string
	}{
		{"a made-up signature alone", bare, ReasonVersion},
		{"an unknown key", unknown, ReasonUnknownID},
		{"another replica", signed(gk, "router/r2", now), ReasonAudience},
		{"a role this call does not take", signed(rk, "router/r1", now), ReasonRole},
		{"out of the window", signed(gk, "router/r1", now.Add(-time.Minute)), ReasonSkew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := &countingBody{Reader: strings.NewReader(strings.Repeat("a", 1<<20))}
			tt.req.Body = body
			_, _, err := v.Verify(tt.req, 1<<20, RoleGateway)
			rejectedFor(t, err, tt.reason)
			if body.read {
				t.Error("the body was read before the headers were checked")
			}
		})
	}
	rs := RouterSignatures{V: gwv}
	if rs.NeedsBody(bare) {
		t.Error("a gateway waits for the body of a request whose only signature header is made up")
	}
	if !rs.NeedsBody(signed(rk, "gateway/gw-a", now)) {
		t.Error("a router's signed request: its body is needed")
	}
}
