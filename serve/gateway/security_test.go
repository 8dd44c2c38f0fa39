package gateway

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
