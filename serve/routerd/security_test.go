package routerd

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/stargate-llm/stargate/serve/auth"
)

// syncBuffer is a log destination safe for the router's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSecurityDrainReplayedAtAnotherReplica (issue 19, observation 5): a
// drain signed for one router replica and accepted there is refused when
// replayed at a second replica, and again at the first; the accepted call
// leaves an audit line naming its key id and role.
func TestSecurityDrainReplayedAtAnotherReplica(t *testing.T) {
	op := auth.Key{ID: "op-2026", Role: auth.RoleOperator, Secret: []byte("operator-secret-0123456789")}
	ring, err := auth.NewKeyring(op)
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	start := func(id string) string {
		url, _ := startRouterWith(t, func(c *Config) {
			c.ID, c.Keys = id, ring
			c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
		}, nil, &echoBackend{})
		return url
	}
	url1, url2 := start("router-1"), start("router-2")
	req, err := auth.NewSigner(op, "operator").NewRequest("router/router-1", http.MethodPost, url1+"/admin/backends/a/drain", nil)
	if err != nil {
		t.Fatal(err)
	}
	send := func(url string) int {
		t.Helper()
		again := req.Clone(req.Context())
		again.URL.Host, again.Host, again.Body = strings.TrimPrefix(url, "http://"), "", http.NoBody
		resp, err := http.DefaultClient.Do(again)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := send(url1); code != http.StatusOK {
		t.Fatalf("drain at router-1: %d", code)
	}
	if code := send(url2); code != http.StatusUnauthorized {
		t.Fatalf("the same drain replayed at router-2: %d, want 401", code)
	}
	if code := send(url1); code != http.StatusUnauthorized {
		t.Fatalf("the same drain replayed at router-1: %d, want 401", code)
	}
	var audited bool
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "admin call" {
			audited = rec["key_id"] == "op-2026" && rec["role"] == "operator" && strings.Contains(rec["action"].(string), "/drain")
		}
	}
	if !audited {
		t.Errorf("no audit line naming key op-2026 and role operator:\n%s", logs.String())
	}
}

// TestSecurityInformation (issue 19, observation 7): with API keys, the
// backend list (internal URLs) and /metrics need one, unless OpenInfo; no
// answer names a backend unless ExposeBackend.
func TestSecurityInformation(t *testing.T) {
	keys, err := auth.ReadAPIKeys(strings.NewReader("client-key-0123456789\n"))
	if err != nil {
		t.Fatal(err)
	}
	get := func(url, path, bearer string) int {
		req, _ := http.NewRequest(http.MethodGet, url+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	closed, _ := startRouterWith(t, func(c *Config) { c.APIKeys, c.ExposeBackend = keys, false }, nil, &echoBackend{})
	open, _ := startRouterWith(t, func(c *Config) { c.APIKeys, c.OpenInfo = keys, true }, nil, &echoBackend{})
	for _, path := range []string{"/v1/stargate/backends", "/metrics"} {
		if code := get(closed, path, ""); code != http.StatusUnauthorized {
			t.Errorf("%s without a key: %d, want 401", path, code)
		}
		if code := get(closed, path, "client-key-0123456789"); code != http.StatusOK {
			t.Errorf("%s with a key: %d", path, code)
		}
		if code := get(open, path, ""); code != http.StatusOK {
			t.Errorf("%s with --open-info: %d", path, code)
		}
	}
	resp, _ := call(t, closed, okBody, map[string]string{"Authorization": "Bearer client-key-0123456789"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Stargate-Backend") != "" {
		t.Errorf("status %d, X-Stargate-Backend %q: want 200 and no backend name", resp.StatusCode, resp.Header.Get("X-Stargate-Backend"))
	}
}
