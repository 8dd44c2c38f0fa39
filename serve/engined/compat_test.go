package engined

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/openai"
)

func get(t *testing.T, url string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	return call(t, http.MethodGet, url, nil, header)
}

// TestVLLMCompat: in vLLM mode the engine answers where vLLM differs from
// the stargate engine as vLLM does.
func TestVLLMCompat(t *testing.T) {
	_, url := start(t, func(c *Config) { c.Compat = CompatVLLM; c.MaxModelLen = 100; c.Key = testEngineKey })
	long := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}]}`
	tests := []struct {
		name, method, path, body string
		status                   int
		want                     []string
	}{
		{"no fence", "POST", "/admin/fence", `{}`, 404, []string{`{"detail":"Not Found"}`}},
		{"no DCGM exporter", "GET", "/dcgm/metrics", ``, 404, []string{`"detail":"Not Found"`}},
		{"wrong method", "GET", "/v1/chat/completions", ``, 405, []string{`"detail":"Method Not Allowed"`}},
		{"broken JSON", "POST", "/v1/chat/completions", `{"messages":`, 400, []string{"json_invalid", "JSON decode error"}},
		{"missing messages repeats the input", "POST", "/v1/chat/completions", `{"model":"stargate-mock","user":"ada-lovelace"}`, 400,
			[]string{"'type': 'missing'", "'loc': ('body', 'messages')", "Field required", `"user":"ada-lovelace"`}},
		{"prompt over the limit", "POST", "/v1/chat/completions", long, 400,
			[]string{"maximum context length is 100 tokens. However, your request has 104 input tokens."}},
		{"max_tokens over the limit", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":99}`, 400,
			[]string{"'max_tokens' or 'max_completion_tokens' is too large: 99.", "your request has 5 input tokens (99 > 100 - 5)"}},
		{"worker header ignored", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, 200, []string{`"completion_tokens":2`}},
		{"tokenize a prompt", "POST", "/tokenize", `{"prompt":"0123456789abcdef"}`, 200, []string{`"count":4`, `"max_model_len":100`, `"tokens":[`}},
		{"tokenize messages", "POST", "/tokenize", `{"messages":[{"role":"user","content":"hi"}]}`, 200, []string{`"count":5`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, url+tt.path, strings.NewReader(tt.body))
			req.Header.Set(HeaderWorker, "7") // a vLLM knows nothing of it
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			var e struct {
				Error struct{ Message string } `json:"error"`
			}
			_ = json.Unmarshal(b, &e)
			text := string(b) + e.Error.Message // the message as a client reads it
			for _, w := range tt.want {
				if resp.StatusCode != tt.status || !strings.Contains(text, w) {
					t.Errorf("%s %s: %d %s; want %d with %q", tt.method, tt.path, resp.StatusCode, b, tt.status, w)
				}
			}
		})
	}
	// The gateway reads the limit out of both context-length errors.
	for _, body := range []string{long, `{"messages":[{"role":"user","content":"hi"}],"max_tokens":99}`} {
		if _, b := post(t, url+"/v1/chat/completions", body, nil); openai.ContextLimit(b) != 100 {
			t.Errorf("ContextLimit(%s) = %d, want 100", b, openai.ContextLimit(b))
		}
	}
	_, b := get(t, url+"/v1/models", nil)
	var models struct {
		Data []struct {
			ID          string `json:"id"`
			Created     int64  `json:"created"`
			OwnedBy     string `json:"owned_by"`
			MaxModelLen int    `json:"max_model_len"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &models); err != nil || len(models.Data) != 1 {
		t.Fatalf("/v1/models: %s", b)
	}
	if m := models.Data[0]; m.Created < 1_600_000_000 || m.OwnedBy != "vllm" || m.MaxModelLen != 100 {
		t.Errorf("/v1/models entry %+v: want created set, owned_by vllm, max_model_len 100", m)
	}
	_, b = get(t, url+"/metrics", nil)
	text := string(b)
	for _, want := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "process_start_time_seconds", "vllm:cache_config_info"} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	for _, not := range []string{"stargate_engine_workers", "max_num_seqs"} {
		if strings.Contains(text, not) {
			t.Errorf("metrics carry %s, which a real vLLM does not export", not)
		}
	}
}

// testEngineKey would let a stargate engine answer fences; a vLLM has none.
var testEngineKey = auth.Key{ID: "k", Secret: []byte("0123456789abcdef0123")}

func TestVLLMCompatNeedsOneWorker(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Compat, cfg.GPUs = CompatVLLM, 2
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "one worker per URL") {
		t.Errorf("compat vllm with 2 GPUs: %v, want a one-worker error", err)
	}
	if _, err := ParseCompat("sglang"); err == nil {
		t.Error("ParseCompat(sglang) passed")
	}
}

// TestAPIKey: with an API key every /v1 path needs the bearer token, as
// vLLM's --api-key does; /health and /metrics stay open.
func TestAPIKey(t *testing.T) {
	_, url := start(t, func(c *Config) { c.APIKey = "sk-test" })
	body := `{"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`
	for _, tt := range []struct {
		auth   string
		status int
	}{{"", 401}, {"Bearer wrong", 401}, {"sk-test", 401}, {"Bearer sk-test", 200}} {
		h := map[string]string{}
		if tt.auth != "" {
			h["Authorization"] = tt.auth
		}
		if resp, b := post(t, url+"/v1/chat/completions", body, h); resp.StatusCode != tt.status {
			t.Errorf("Authorization %q: %d %s, want %d", tt.auth, resp.StatusCode, b, tt.status)
		}
		if resp, _ := get(t, url+"/v1/models", h); resp.StatusCode != tt.status {
			t.Errorf("GET /v1/models with Authorization %q: %d, want %d", tt.auth, resp.StatusCode, tt.status)
		}
	}
	for _, p := range []string{"/health", "/metrics"} {
		if resp, _ := get(t, url+p, nil); resp.StatusCode != 200 {
			t.Errorf("%s without a key: %d, want 200", p, resp.StatusCode)
		}
	}
}
