package routerd

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
	"github.com/stargate-llm/stargate/telemetry"
)

// TestStatsCacheTokens: a gateway's cache_tokens reaches the placement
// core's view of its backend, at registration and as later stats change
// it; a lying, huge claim is clamped to telemetry.MaxCacheTokens, and the field
// is under the message's signature.
func TestStatsCacheTokens(t *testing.T) {
	gw := auth.Key{ID: "gw-key", Role: auth.RoleGateway, Secret: []byte("gateway-secret-0123456789")}
	ring, err := auth.NewKeyring(gw)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Keys = ring
	s, err := New(cfg, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	signer := auth.NewSigner(gw, "gw-a")
	seq := uint64(0)
	body := func(cacheTokens int64) []byte {
		seq++
		// Built as JSON text so that a value beyond int32 goes out as a
		// lying gateway would write it.
		m := map[string]any{"backend": "gw-a", "url": "http://127.0.0.1:1", "seq": seq, "capacity": 4, "models": []string{"m"},
			"max_model_len": 4096, "workers": 1, "cache_tokens": cacheTokens}
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send := func(signed, sent []byte) int {
		t.Helper()
		req, err := signer.NewRequest(auth.Audience("router", cfg.ID), http.MethodPost, "http://router"+wire.PathStats, signed)
		if err != nil {
			t.Fatal(err)
		}
		req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(sent)), int64(len(sent))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	view := func() int {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		vs := s.core.Views()
		if len(vs) != 1 {
			t.Fatalf("%d backends in the core, want 1", len(vs))
		}
		return vs[0].CacheTokens
	}
	steps := []struct {
		name string
		sent int64
		want int
	}{
		{"registration", 24_000_000, 24_000_000},
		{"a later size", 30_000_000, 30_000_000},
		{"a lie beyond the bound", 1 << 50, telemetry.MaxCacheTokens},
		{"negative", -5, 0},
		{"unknown again", 0, 0},
	}
	for _, st := range steps {
		b := body(st.sent)
		if code := send(b, b); code != http.StatusOK {
			t.Fatalf("%s: stats refused: %d", st.name, code)
		}
		if got := view(); got != st.want {
			t.Errorf("%s: core view cache tokens %d, want %d", st.name, got, st.want)
		}
	}
	signed := body(1000)
	tampered := []byte(strings.Replace(string(signed), `"cache_tokens":1000`, `"cache_tokens":2000000000`, 1))
	if string(tampered) == string(signed) {
		t.Fatalf("the test did not change cache_tokens in %s", signed)
	}
	if code := send(signed, tampered); code != http.StatusUnauthorized {
		t.Errorf("cache_tokens changed after signing: %d, want 401", code)
	}
	if got := view(); got != 0 {
		t.Errorf("a refused message changed the view's cache tokens to %d", got)
	}
}
