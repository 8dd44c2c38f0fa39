package routerd

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// sseBackend answers any POST with a fixed event stream (as /v1/responses
// streams) when the body asks to stream, else with JSON naming the path; it
// serves only model m.
type sseBackend struct{ model string }

const responsesStream = "event: response.created\ndata: {\"type\":\"response.created\"}\n\nevent: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\nevent: response.completed\ndata: {\"type\":\"response.completed\"}\n\n"

func (b *sseBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	body, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(body, &req)
	if req.Model != b.model {
		http.Error(w, `{"error":{"message":"no such model","code":404}}`, http.StatusNotFound)
		return
	}
	if req.Stream {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, responsesStream)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"path": r.URL.Path, "model": req.Model, "body": string(body)})
}

func do(t *testing.T, method, url, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

// /v1/responses, /v1/embeddings and any other model-bearing POST under /v1
// are placed by model and proxied unchanged, streaming included.
func TestPassthroughByModel(t *testing.T) {
	a, b := &sseBackend{model: "m1"}, &sseBackend{model: "m2"}
	url, _ := startRouterWith(t, func(c *Config) {
		c.Policy = "pulsar-waw"
		c.Static[0].Models, c.Static[1].Models = []string{"m1"}, []string{"m2"}
	}, nil, a, b)
	for _, tc := range []struct{ path, body string }{
		{"/v1/responses", `{"model":"m1","input":"hello"}`},
		{"/v1/responses", `{"model":"m2","input":[{"role":"user","content":"hello"}]}`},
		{"/v1/embeddings", `{"model":"m2","input":["a","b"]}`},
		{"/v1/rerank", `{"model":"m1","query":"q","documents":["a"]}`},
	} {
		for i := range 8 { // different sessions: affinity alone would spread them
			h := map[string]string{"X-Session-ID": string(rune('a' + i))}
			req, _ := http.NewRequest(http.MethodPost, url+tc.path, strings.NewReader(tc.body))
			for k, v := range h {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]string
			err = json.NewDecoder(resp.Body).Decode(&got)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || err != nil || got["path"] != tc.path || got["body"] != tc.body {
				t.Fatalf("POST %s %s: %d %v %v, want it proxied unchanged to its model's backend", tc.path, tc.body, resp.StatusCode, got, err)
			}
		}
	}
	resp, text := do(t, http.MethodPost, url+"/v1/responses", `{"model":"m2","input":"hi","stream":true}`)
	if resp.StatusCode != http.StatusOK || text != responsesStream || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("streamed /v1/responses: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), text)
	}
	resp, text = do(t, http.MethodPost, url+"/v1/embeddings", `{"model":"m9","input":"x"}`)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(text, `m9`) || !strings.Contains(text, "m1, m2") {
		t.Fatalf("unknown model on /v1/embeddings: %d %s", resp.StatusCode, text)
	}
}

// Every 404 and 405 is JSON in OpenAI's shape; a 405 says what is allowed.
func TestJSONErrorsForPathsAndMethods(t *testing.T) {
	url, _ := startRouterWith(t, nil, nil, &echoBackend{})
	for _, tc := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{http.MethodGet, "/nope", http.StatusNotFound, ""},
		{http.MethodPost, "/v2/chat/completions", http.StatusNotFound, ""},
		{http.MethodGet, "/v1/chat/completions", http.StatusMethodNotAllowed, "POST"},
		{http.MethodGet, "/v1/responses", http.StatusMethodNotAllowed, "POST"},
		{http.MethodPost, "/v1/models", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodDelete, "/v1/models", http.StatusMethodNotAllowed, "GET, HEAD"},
		{http.MethodPost, "/v1/anything", http.StatusNotFound, ""}, // no model in the body
	} {
		resp, text := do(t, tc.method, url+tc.path, "{}")
		var e struct {
			Error struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if resp.StatusCode != tc.status || json.Unmarshal([]byte(text), &e) != nil || e.Error.Message == "" {
			t.Errorf("%s %s: %d %q, want %d with an OpenAI error body", tc.method, tc.path, resp.StatusCode, text, tc.status)
		}
		if tc.allow != "" && !strings.Contains(resp.Header.Get("Allow"), tc.allow) {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, resp.Header.Get("Allow"), tc.allow)
		}
	}
}

// /v1/models gives each model created (stable) and owned_by.
func TestModelsListCreatedAndOwner(t *testing.T) {
	url, _ := startRouterWith(t, func(c *Config) { c.Static[0].Models = []string{"m1"} }, nil, &echoBackend{})
	var first int64
	for range 2 {
		resp, text := do(t, http.MethodGet, url+"/v1/models", "")
		var list struct {
			Data []struct {
				ID      string `json:"id"`
				Created int64  `json:"created"`
				OwnedBy string `json:"owned_by"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(text), &list); err != nil || resp.StatusCode != http.StatusOK || len(list.Data) != 1 {
			t.Fatalf("/v1/models: %d %s", resp.StatusCode, text)
		}
		m := list.Data[0]
		if m.ID != "m1" || m.Created <= 0 || m.OwnedBy == "" || (first != 0 && m.Created != first) {
			t.Fatalf("/v1/models entry %+v: want m1 with a stable created and an owner", m)
		}
		first = m.Created
	}
}
