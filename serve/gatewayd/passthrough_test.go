package gatewayd

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// /v1/responses and /v1/embeddings reach the engine unchanged through the
// gateway, which admits them like completions.
func TestPassthroughPaths(t *testing.T) {
	got := make(chan string, 4)
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			_, _ = io.WriteString(w, `{"data":[{"id":"m1","max_model_len":4096,"owned_by":"vllm"}]}`)
		case "/v1/responses", "/v1/embeddings":
			b, _ := io.ReadAll(r.Body)
			got <- r.URL.Path + " " + string(b)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer eng.Close()
	_, url := startGateway(t, eng.URL, nil)
	for _, path := range []string{"/v1/responses", "/v1/embeddings"} {
		body := `{"model":"m1","input":"hello"}`
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(text) != `{"ok":true}` {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, text)
		}
		if g := <-got; g != path+" "+body {
			t.Errorf("engine got %q, want %q", g, path+" "+body)
		}
	}
}
