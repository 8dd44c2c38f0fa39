package routerd

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stargate-llm/stargate/policy"
)

// TestPrefixSharedSystemPrompt: requests of different users that share a
// long system prompt land on one backend under the prefix policy (whose
// index learns where the prompt went), where pulsar-waw spreads them by
// their session keys.
func TestPrefixSharedSystemPrompt(t *testing.T) {
	system := strings.Repeat("You are a careful assistant for the Stargate project. ", 40) // about 2,000 bytes
	for _, tt := range []struct {
		policy  string
		oneHost bool
	}{
		{policy.PrefixName, true},
		{"pulsar-waw", false},
	} {
		t.Run(tt.policy, func(t *testing.T) {
			var mu sync.Mutex
			hits := map[string]int{}
			cfg := DefaultConfig()
			cfg.Policy = tt.policy
			for i := range 4 {
				name := fmt.Sprintf("b%d", i)
				backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = io.Copy(io.Discard, r.Body)
					mu.Lock()
					hits[name]++
					mu.Unlock()
					w.Header().Set("Content-Type", "text/event-stream")
					fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
				}))
				defer backend.Close()
				cfg.Static = append(cfg.Static, StaticBackend{Name: name, URL: backend.URL, Capacity: 8})
			}
			srv, err := New(cfg, policy.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { srv.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			front := httptest.NewServer(srv.Handler())
			defer front.Close()

			for i := range 8 {
				body := fmt.Sprintf(`{"stream":true,"max_tokens":4,"user":"user-%d","messages":[{"role":"system","content":%q},{"role":"user","content":"question %d"}]}`, i, system, i)
				resp, err := http.Post(front.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("request %d: %s: %s", i, resp.Status, b)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if got := len(hits) == 1; got != tt.oneHost {
				t.Errorf("requests per backend %v; want all on one backend: %v", hits, tt.oneHost)
			}
		})
	}
}
