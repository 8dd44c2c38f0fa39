package engined

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start serves a mock engine until the test ends.
func start(t *testing.T, mutate func(*Config)) (*Server, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MaxModelLen = 4096
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); srv.Run(ctx) }()
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); cancel(); wg.Wait() })
	return srv, hs.URL
}

func post(t *testing.T, url, body string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	return call(t, http.MethodPost, url, strings.NewReader(body), header)
}

// call sends one request (a JSON body when body is not nil) with header
// set and returns the answer with its whole body.
func call(t *testing.T, method, url string, body io.Reader, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

type completion struct {
	Choices []struct {
		Message struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		Text         string  `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Details    struct {
			Cached int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

const chatBody = `{"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about routers."}],"max_tokens":6}`

func TestChatCompletion(t *testing.T) {
	_, url := start(t, nil)
	resp, b := post(t, url+"/v1/chat/completions", chatBody, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var c completion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	// Prompt: 4 + (14+3)/4 and 4 + (28+3)/4 tokens.
	if c.Usage == nil || c.Usage.Prompt != 4+4+4+7 || c.Usage.Completion != 6 {
		t.Fatalf("usage %+v, want 19 prompt and 6 completion tokens", c.Usage)
	}
	if len(c.Choices) != 1 || len(strings.Fields(c.Choices[0].Message.Content)) != 6 || *c.Choices[0].FinishReason != "length" {
		t.Fatalf("choices %+v", c.Choices)
	}
	// Same seed, same request: same text, from another server too.
	_, url2 := start(t, nil)
	_, b2 := post(t, url2+"/v1/chat/completions", chatBody, nil)
	var c2 completion
	_ = json.Unmarshal(b2, &c2)
	if c2.Choices[0].Message.Content != c.Choices[0].Message.Content {
		t.Error("the same seed and request gave different text")
	}
}

func TestStreamMatchesFullAnswer(t *testing.T) {
	_, url := start(t, nil)
	_, full := post(t, url+"/v1/chat/completions", chatBody, nil)
	var want completion
	_ = json.Unmarshal(full, &want)

	body := strings.Replace(chatBody, `"max_tokens":6`, `"max_tokens":6,"stream":true,"stream_options":{"include_usage":true}`, 1)
	resp, b := post(t, url+"/v1/chat/completions", body, map[string]string{"X-Session-ID": "other"})
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	var text strings.Builder
	var events []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	var usage *completion
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		events = append(events, data)
		if data == "[DONE]" {
			continue
		}
		var c completion
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("bad chunk %q: %v", data, err)
		}
		if c.Usage != nil {
			usage = &c
		}
		for _, ch := range c.Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if events[len(events)-1] != "[DONE]" {
		t.Fatalf("stream does not end with [DONE]: %q", events[len(events)-1])
	}
	if text.String() != want.Choices[0].Message.Content {
		t.Errorf("streamed %q, full answer %q", text.String(), want.Choices[0].Message.Content)
	}
	if usage == nil || usage.Usage.Completion != 6 {
		t.Errorf("no usage chunk with 6 completion tokens: %+v", usage)
	}
}

// TestStampTTFT: with StampTTFT, the first content event of a stream comes
// after one SSE comment with the engine's own time to it; the rest of the
// stream is unchanged.
func TestStampTTFT(t *testing.T) {
	_, url := start(t, func(c *Config) { c.StampTTFT = true })
	body := strings.Replace(chatBody, `"max_tokens":6`, `"max_tokens":6,"stream":true`, 1)
	t0 := time.Now()
	_, b := post(t, url+"/v1/chat/completions", body, nil)
	elapsed := time.Since(t0)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var stamps []int
	for i, line := range lines {
		v, ok := strings.CutPrefix(line, TTFTStamp)
		if !ok {
			continue
		}
		us, err := strconv.Atoi(v)
		if err != nil || us < 0 || time.Duration(us)*time.Microsecond > elapsed {
			t.Fatalf("stamp %q: want microseconds within the %v the request took", line, elapsed)
		}
		if i+1 >= len(lines) || !strings.Contains(lines[i+1], `"content":"`) {
			t.Fatalf("the stamp is not followed by the first content event: %q", lines[i+1:])
		}
		stamps = append(stamps, us)
	}
	if len(stamps) != 1 {
		t.Fatalf("%d stamps in %q, want 1", len(stamps), b)
	}
	if strings.Index(string(b), TTFTStamp) > strings.Index(string(b), `"content":"`) {
		t.Error("a content event comes before the stamp")
	}
}

func TestPrefixCacheAcrossTurns(t *testing.T) {
	_, url := start(t, nil)
	turn1 := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 4000) + `"}],"max_tokens":4}`
	turn2 := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 4000) + `"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}],"max_tokens":4}`
	h := map[string]string{"X-Session-ID": "s1"}
	post(t, url+"/v1/chat/completions", turn1, h)
	_, b := post(t, url+"/v1/chat/completions", turn2, h)
	var c completion
	_ = json.Unmarshal(b, &c)
	// Turn 1 left 1004 prompt + 4 output tokens on its worker.
	if c.Usage == nil || c.Usage.Details.Cached != 1008 {
		t.Errorf("second turn: %+v, want 1008 cached tokens", c.Usage)
	}
}

func TestBadRequests(t *testing.T) {
	_, url := start(t, func(c *Config) { c.MaxModelLen = 100; c.MaxBodyBytes = 10_000 })
	tests := []struct {
		name, path, body string
		status           int
		want             string
	}{
		{"broken JSON", "/v1/chat/completions", `{"messages":`, 400, "not valid JSON"},
		{"no messages", "/v1/chat/completions", `{"messages":[]}`, 400, "at least one message"},
		{"unknown role", "/v1/chat/completions", `{"messages":[{"role":"wizard","content":"x"}]}`, 400, `unknown role "wizard"`},
		{"image part", "/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "only text"},
		{"n > 1", "/v1/chat/completions", `{"n":2,"messages":[{"role":"user","content":"x"}]}`, 400, "n must be 1"},
		{"zero max_tokens", "/v1/chat/completions", `{"max_tokens":0,"messages":[{"role":"user","content":"x"}]}`, 400, "at least 1"},
		{"wrong model", "/v1/chat/completions", `{"model":"gpt-9","messages":[{"role":"user","content":"x"}]}`, 404, "does not exist"},
		{"too long", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 400) + `"}],"max_tokens":10}`, 400, "maximum context length is 100 tokens. However, you requested 114 tokens (104 in the messages, 10 in the completion)"},
		{"body too large", "/v1/chat/completions", `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 20_000) + `"}]}`, 413, "larger than 10000 bytes"},
		{"empty prompt", "/v1/completions", `{"prompt":""}`, 400, "prompt is empty"},
		{"max_tokens overflow", "/v1/chat/completions", `{"max_tokens":9223372036854775807,"messages":[{"role":"user","content":"hi"}]}`, 400, "maximum context length"},
		{"stream_options without stream", "/v1/chat/completions", `{"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`, 400, "only allowed when stream is true"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := post(t, url+tt.path, tt.body, nil)
			var body struct {
				Error struct {
					Message, Type string
					Code          int
				}
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("error body is not JSON: %s", b)
			}
			e := body.Error
			if resp.StatusCode != tt.status || e.Type == "" || e.Code != tt.status || !strings.Contains(e.Message, tt.want) {
				t.Errorf("status %d body %s; want %d with %q", resp.StatusCode, b, tt.status, tt.want)
			}
		})
	}
}

func TestCompletionsAndModels(t *testing.T) {
	_, url := start(t, nil)
	resp, b := post(t, url+"/v1/completions", `{"prompt":"once upon a time","max_tokens":3}`, nil)
	var c completion
	if err := json.Unmarshal(b, &c); err != nil || resp.StatusCode != 200 || len(strings.Fields(c.Choices[0].Text)) != 3 {
		t.Fatalf("completions: %d %s", resp.StatusCode, b)
	}
	r, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Body.Close() }()
	var m struct {
		Data []struct {
			ID          string `json:"id"`
			MaxModelLen int    `json:"max_model_len"`
		}
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.Data) != 1 || m.Data[0].ID != "stargate-mock" || m.Data[0].MaxModelLen != 4096 {
		t.Errorf("models: %+v %v", m, err)
	}
}

// TestClientGoneCancels: a client that leaves mid-stream frees its sequence.
func TestClientGoneCancels(t *testing.T) {
	srv, url := start(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	body := `{"messages":[{"role":"user","content":"hello"}],"max_tokens":2000,"stream":true}`
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	// Read the first chunk, then leave.
	if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	cancel()
	_ = resp.Body.Close()
	// The request leaves the server at once and the worker at the end of
	// the step in progress.
	deadline := time.Now().Add(5 * time.Second)
	for {
		running, _, _ := srv.load()
		if srv.Active() == 0 && running == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests held, %d sequences running 5 s after the client left", srv.Active(), running)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := DefaultConfig()
	bad.GPUs, bad.Model, bad.MaxModelLen = 0, "", 1
	if _, err := New(bad); err == nil {
		t.Error("invalid config accepted")
	}
}

func TestMetricsUseVLLMNames(t *testing.T) {
	_, url := start(t, nil)
	h := map[string]string{"X-Session-ID": "m"}
	post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"`+strings.Repeat("b", 400)+`"}],"max_tokens":2}`, h)
	post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"`+strings.Repeat("b", 400)+`"},{"role":"user","content":"and"}],"max_tokens":2}`, h)
	r, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Body.Close() }()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) float64 {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) == 0 {
			t.Fatalf("no metric %s", name)
		}
		m := f.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue()
		case m.GetHistogram() != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
		return 0
	}
	// Prompts of 104 and 109 tokens; the second found 106 cached (104 + 2).
	for name, want := range map[string]float64{
		"vllm:prefix_cache_queries_total":  213,
		"vllm:prefix_cache_hits_total":     106,
		"vllm:generation_tokens_total":     4,
		"vllm:time_to_first_token_seconds": 2,
		"vllm:e2e_request_latency_seconds": 2,
		"vllm:num_requests_running":        0,
		"vllm:num_requests_waiting":        0,
		"vllm:kv_cache_usage_perc":         0,
		"vllm:cache_config_info":           1,
	} {
		if got := value(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// TestHostTierAcrossTurns: the mock engine runs the engine core, host tier
// included. A session's entry pushed out of a small GPU KV budget by
// another session's long prompt is found again in the host tier at its
// next turn, which reports it cached; without the tier it is recomputed.
func TestHostTierAcrossTurns(t *testing.T) {
	for _, host := range []int{0, 10_000} {
		_, url := start(t, func(c *Config) {
			c.GPUs = 1
			c.Profile.KVTokens, c.MaxModelLen = 3000, 3000
			if host > 0 {
				c.Profile.HostKVTokens, c.Profile.HostKVLoadTokensPerS = host, 1e6
			}
		})
		turn1 := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 4000) + `"}],"max_tokens":4}`
		turn2 := `{"messages":[{"role":"user","content":"` + strings.Repeat("a", 4000) + `"},{"role":"assistant","content":"ok"},{"role":"user","content":"more"}],"max_tokens":4}`
		other := `{"messages":[{"role":"user","content":"` + strings.Repeat("b", 10_000) + `"}],"max_tokens":4}`
		post(t, url+"/v1/chat/completions", turn1, map[string]string{"X-Session-ID": "s1"})
		post(t, url+"/v1/chat/completions", other, map[string]string{"X-Session-ID": "s2"})
		_, b := post(t, url+"/v1/chat/completions", turn2, map[string]string{"X-Session-ID": "s1"})
		var c completion
		_ = json.Unmarshal(b, &c)
		// Turn 1 left 1004 prompt + 4 output tokens; s2's 2,504 tokens push
		// them out of the 3,000-token GPU budget.
		want := 0
		if host > 0 {
			want = 1008
		}
		if c.Usage == nil || c.Usage.Details.Cached != want {
			t.Errorf("host tier %d tokens: second turn %+v, want %d cached tokens", host, c.Usage, want)
		}
		// vllm:cache_config_info names the host tier in 16-token CPU blocks.
		r, err := http.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		text, _ := io.ReadAll(r.Body)
		_ = r.Body.Close()
		if got := strings.Contains(string(text), `num_cpu_blocks="625"`); got != (host > 0) {
			t.Errorf("host tier %d tokens: num_cpu_blocks=\"625\" in /metrics is %v", host, got)
		}
	}
}
