package gatewayd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	core "github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
)

// poisonEngine answers like vLLM: /v1/models advertises 32768 tokens; a
// completion whose temperature is not a number gets vLLM's validation error,
// which quotes the client's value; a prompt over 4096 words gets vLLM's
// context-length refusal naming 4096.
func poisonEngine(t *testing.T) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[{"id":"m","max_model_len":32768}]}`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n")
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Temperature any `json:"temperature"`
			Messages    []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		if s, ok := req.Temperature.(string); ok {
			w.WriteHeader(http.StatusBadRequest)
			msg, _ := json.Marshal(fmt.Sprintf("[{'type': 'float_parsing', 'loc': ('body', 'temperature'), 'msg': 'Input should be a valid number, unable to parse string as a number', 'input': '%s'}]", s))
			fmt.Fprintf(w, `{"object":"error","message":%s,"type":"Bad Request","param":null,"code":400}`, msg)
			return
		}
		if n := len(strings.Fields(req.Messages[0].Content)); n > 4096 {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, your request has %d input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}`, n+10)
			return
		}
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"ok"}}]}`)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

// statsSink is a router that records the max_model_len of the telemetry
// reports in the stats it gets (where a learned limit goes).
type statsSink struct {
	mu   sync.Mutex
	last int
	n    int
}

func (s *statsSink) serve(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var m wire.Stats
		_ = json.NewDecoder(r.Body).Decode(&m)
		s.mu.Lock()
		if m.Signals != nil {
			s.last, s.n = m.Signals.MaxModelLen, s.n+1
		}
		s.mu.Unlock()
		_, _ = io.WriteString(w, `{"router":"sink"}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func (s *statsSink) get() (last, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.n
}

// TestSecurityContextLimitPoisoning (issue 19, observation 4): a request
// whose temperature is the text of a context-length refusal makes vLLM quote
// it back in a 400; the gateway must not take it for the engine's limit. A
// genuine refusal of a long prompt still teaches the limit.
func TestSecurityContextLimitPoisoning(t *testing.T) {
	sink := &statsSink{}
	routerURL := sink.serve(t)
	_, url := startGateway(t, poisonEngine(t), func(c *Config) {
		c.Routers, c.Advertise = []string{routerURL}, "http://127.0.0.1:1"
	})
	ask := func(body string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err := post(ctx, url, body)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("status %d, want the engine's 400", resp.StatusCode)
		}
	}
	for i := range 5 {
		ask(fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi %d"}],"temperature":"This model's maximum context length is 8 tokens. However, you requested 9000 tokens (9000 in the messages, 0 in the completion). Please reduce the length of the messages or completion."}`, i))
	}
	_, n0 := sink.get()
	poll.Until(t, 10*time.Second, "two more stats messages", func() bool { _, n := sink.get(); return n >= n0+2 })
	if last, _ := sink.get(); last != 32768 {
		t.Fatalf("after crafted requests the gateway reports max_model_len %d, want the advertised 32768", last)
	}
	ask(`{"model":"m","messages":[{"role":"user","content":"` + strings.Repeat("word ", 5000) + `"}]}`)
	poll.Until(t, 10*time.Second, "the genuine limit in the stats", func() bool { last, _ := sink.get(); return last == 4096 })
}

// TestSecurityRouterHeaderBounded (issue 19, observation 3): every distinct
// X-Stargate-Router value used to take a map entry for good, so unique
// large values grew a gateway without bound. The map now holds at most
// core.MaxRouters valid ids, and invalid or overlong values none.
func TestSecurityRouterHeaderBounded(t *testing.T) {
	g, _ := startGateway(t, poisonEngine(t), nil)
	h := g.Handler()
	long := strings.Repeat("r", 4096)
	for i := range 2 * core.MaxRouters {
		for _, name := range []string{fmt.Sprintf("%s-%d", long, i), fmt.Sprintf("router-%d", i), fmt.Sprintf("bad name %d", i)} {
			req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
			req.Header.Set(wire.HeaderRouter, name)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Fatalf("request %d: status %d: %s", i, rec.Code, rec.Body)
			}
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.routerIx) > core.MaxRouters {
		t.Fatalf("the gateway keeps %d router names, want at most %d", len(g.routerIx), core.MaxRouters)
	}
	for name := range g.routerIx {
		if !wire.ValidID(name) {
			t.Fatalf("the gateway keeps an invalid router name of %d bytes", len(name))
		}
	}
}

// TestSecurityDataPlaneAuthenticated (issue 19, observations 2 and 7): a
// gateway with keys serves completions only to a router's signed request
// addressed to it, or a client with an API key; a replay, a request signed
// for another gateway or with another role's key is refused. /metrics
// needs the same proof, and no answer names the backend.
func TestSecurityDataPlaneAuthenticated(t *testing.T) {
	routerKey := auth.Key{ID: "r-1", Role: auth.RoleRouter, Secret: []byte("router-secret-0123456789")}
	gwKey := auth.Key{ID: "g-1", Role: auth.RoleGateway, Secret: []byte("gateway-secret-0123456789")}
	ring, err := auth.NewKeyring(routerKey, gwKey)
	if err != nil {
		t.Fatal(err)
	}
	apiKeys, err := auth.ReadAPIKeys(strings.NewReader("client-key-0123456789\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, url := startGateway(t, poisonEngine(t), func(c *Config) {
		c.Key, c.Keys, c.APIKeys, c.OpenDataPlane = auth.Key{}, ring, apiKeys, false
	})
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	router := auth.NewSigner(routerKey, "router-1")
	signed := func(s *auth.Signer, audience string) *http.Request {
		req, _ := s.NewRequest(audience, http.MethodPost, url+"/v1/chat/completions", []byte(body))
		return req
	}
	plain := func(bearer string) *http.Request {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		return req
	}
	good := signed(router, "gateway/gw")
	raw, _ := io.ReadAll(good.Body)
	replay := good.Clone(context.Background())
	good.Body, replay.Body = io.NopCloser(strings.NewReader(string(raw))), io.NopCloser(strings.NewReader(string(raw)))
	for _, tt := range []struct {
		name string
		req  *http.Request
		want int
	}{
		{"no proof", plain(""), http.StatusUnauthorized},
		{"unknown API key", plain("not-a-client-key-0000"), http.StatusUnauthorized},
		{"API key", plain("client-key-0123456789"), http.StatusOK},
		{"router signature", good, http.StatusOK},
		{"replayed router signature", replay, http.StatusUnauthorized},
		{"signed for another gateway", signed(router, "gateway/other"), http.StatusUnauthorized},
		{"gateway key", signed(auth.NewSigner(gwKey, "gw-b"), "gateway/gw"), http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := http.DefaultClient.Do(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
			if b := resp.Header.Get(wire.HeaderBackend); b != "" {
				t.Errorf("the answer names the backend %q", b)
			}
		})
	}
	for bearer, want := range map[string]int{"": http.StatusUnauthorized, "client-key-0123456789": http.StatusOK} {
		req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("/metrics with bearer %q: status %d, want %d", bearer, resp.StatusCode, want)
		}
	}
}
