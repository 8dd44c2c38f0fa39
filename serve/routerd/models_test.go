package routerd

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// modelBackend serves the models it lists and answers any other with the
// engine's own 404; it counts what it got, by model.
type modelBackend struct {
	models []string
	mu     sync.Mutex
	got    map[string]int
}

func (m *modelBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model string `json:"model"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	m.mu.Lock()
	if m.got == nil {
		m.got = map[string]int{}
	}
	m.got[req.Model]++
	m.mu.Unlock()
	for _, s := range m.models {
		if s == req.Model {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"model":%q,"choices":[{"message":{"content":"ok"}}]}`, req.Model)
			return
		}
	}
	http.Error(w, `{"error":{"message":"The model does not exist.","type":"NotFoundError","code":404}}`, http.StatusNotFound)
}

func (m *modelBackend) seen() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]int{}
	for k, v := range m.got {
		out[k] = v
	}
	return out
}

// Two backends serving different models: every request reaches a backend
// that serves its model, whatever the policy's affinity would say; a model
// no backend serves gets one 404 from the router, naming the models it
// knows, and reaches no backend.
func TestPlacementByModelLive(t *testing.T) {
	a, b := &modelBackend{models: []string{"m1"}}, &modelBackend{models: []string{"m2", "m2-lora"}}
	url, srv := startRouterWith(t, func(c *Config) {
		c.Policy = "pulsar-waw"
		c.Static[0].Models, c.Static[1].Models = a.models, b.models
	}, nil, a, b)
	for i := range 20 {
		for _, m := range []string{"m1", "m2", "m2-lora"} {
			body := fmt.Sprintf(`{"model":%q,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, m)
			resp, text := call(t, url, body, map[string]string{"X-Session-ID": fmt.Sprintf("s%d", i)})
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: %d %s", m, resp.StatusCode, text)
			}
		}
	}
	if ga, gb := a.seen(), b.seen(); ga["m1"] != 20 || len(ga) != 1 || gb["m2"] != 20 || gb["m2-lora"] != 20 || len(gb) != 2 {
		t.Fatalf("a got %v, b got %v: each must get only its own models", ga, gb)
	}
	resp, text := call(t, url, `{"model":"m3","max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, nil)
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(text), &e); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown model: %d %s (%v)", resp.StatusCode, text, err)
	}
	for _, m := range []string{`"m3"`, "m1", "m2", "m2-lora"} {
		if !strings.Contains(e.Error.Message, m) {
			t.Errorf("the 404 %q does not name %s", e.Error.Message, m)
		}
	}
	if n := a.seen()["m3"] + b.seen()["m3"]; n != 0 {
		t.Errorf("an unknown model reached a backend %d times", n)
	}
	c := srv.Counts()
	if c.Rejected[ReasonUnknownModel] != 1 || len(c.Failed) != 0 {
		t.Errorf("counts %+v: want one rejected as %s and no failure", c.Counts, ReasonUnknownModel)
	}
}

// lenBackend takes every prompt up to limit bytes and refuses a longer one
// as vLLM does, with its own count; it counts the calls.
type lenBackend struct {
	limit int
	mu    sync.Mutex
	calls int
}

func (l *lenBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	l.mu.Lock()
	l.calls++
	l.mu.Unlock()
	if len(body) > l.limit {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"error":{"message":"This model's maximum context length is 100 tokens. However, you requested %d tokens in the messages.","type":"BadRequestError","code":400}}`, len(body))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"ok"}}]}`))
}

func (l *lenBackend) n() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.calls
}

// The router never refuses a prompt on its bytes-per-token estimate alone:
// a prompt the estimate puts past every backend's limit goes to an engine,
// whose count decides; its 400 reaches the client once, unchanged.
func TestEngineCountDecides(t *testing.T) {
	a, b := &lenBackend{limit: 2000}, &lenBackend{limit: 2000}
	url, _ := startRouterWith(t, func(c *Config) {
		c.Static[0].MaxModelLen, c.Static[1].MaxModelLen = 100, 100
	}, nil, a, b)
	fits := fmt.Sprintf(`{"max_tokens":4,"messages":[{"role":"user","content":%q}]}`, strings.Repeat("x", 1200))
	resp, text := call(t, url, fits, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a prompt the engine takes (estimate %d bytes over 4/token > 100): %d %s", 1200, resp.StatusCode, text)
	}
	long := fmt.Sprintf(`{"max_tokens":4,"messages":[{"role":"user","content":%q}]}`, strings.Repeat("x", 4000))
	before := a.n() + b.n()
	resp, text = call(t, url, long, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(text, "maximum context length is 100 tokens") {
		t.Fatalf("a prompt the engine refuses: %d %s, want the engine's own 400", resp.StatusCode, text)
	}
	if n := a.n() + b.n() - before; n != 1 {
		t.Errorf("the engine's 400 took %d calls; it is final after one", n)
	}
}
