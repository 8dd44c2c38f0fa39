package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/engined"
)

// conformanceLimit is the engines' context limit in the conformance fleet.
const conformanceLimit = 512

// startTwoModels starts router -> gateway -> engine (vLLM mode, one worker
// per URL) for two backends serving different models, m-a and m-b.
func startTwoModels(t *testing.T) *Fleet {
	t.Helper()
	reg := policy.NewRegistry()
	fl, _ := config.Preset("small")
	cfg, err := fl.SimConfig(config.Run{Policy: "pulsar-waw", RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Backends = cfg.Backends[:2]
	for i, m := range []string{"m-a", "m-b"} {
		cfg.Backends[i].Workers, cfg.Backends[i].Models = 1, []string{m}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := Start(ctx, cfg, reg, Options{Seed: 1, Compat: engined.CompatVLLM, MaxModelLen: conformanceLimit, OpenInfo: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

// TestConformanceTwoModels drives the whole path with the official OpenAI
// Go client: two models on two backends, streaming and not, /v1/models, an
// unknown model, and prompts at the limit and one token past it.
func TestConformanceTwoModels(t *testing.T) {
	f := startTwoModels(t)
	client := openai.NewClient(option.WithBaseURL(f.RouterURLs[0]+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	for _, m := range []string{"m-a", "m-b"} {
		for i := range 6 { // different sessions: affinity alone would spread them over both
			params := openai.ChatCompletionNewParams{Model: m, User: openai.String(fmt.Sprintf("user-%d", i)),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Route me by model.")}, MaxTokens: openai.Int(5)}
			resp, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				t.Fatalf("%s, session %d: %v", m, i, err)
			}
			if resp.Model != m || resp.Usage.CompletionTokens != 5 {
				t.Fatalf("%s, session %d: answered by model %q (usage %+v)", m, i, resp.Model, resp.Usage)
			}
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
			stream := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for stream.Next() {
				acc.AddChunk(stream.Current())
			}
			if err := stream.Err(); err != nil {
				t.Fatalf("%s streamed: %v", m, err)
			}
			if acc.Model != m || acc.Usage.CompletionTokens != 5 || acc.Choices[0].Message.Content == "" {
				t.Fatalf("%s streamed: model %q, usage %+v, %q", m, acc.Model, acc.Usage, acc.Choices[0].Message.Content)
			}
		}
	}
	models, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	owners := map[string]string{}
	for _, m := range models.Data {
		owners[m.ID] = m.OwnedBy
		if m.Created <= 0 {
			t.Errorf("model %s has created %d", m.ID, m.Created)
		}
	}
	if owners["m-a"] != "vllm" || owners["m-b"] != "vllm" || len(owners) != 2 {
		t.Errorf("/v1/models owners %v, want m-a and m-b owned by vllm", owners)
	}
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m-c",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}, MaxTokens: openai.Int(2)})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || !strings.Contains(apiErr.Message, "m-a, m-b") {
		t.Errorf("unknown model: %v, want a 404 naming m-a and m-b", err)
	}

	// Prompts near the limit: the engine's own count (its /tokenize)
	// decides; exactly at the limit passes, one token more is its 400.
	prompt := strings.Repeat("near the limit ", 100)
	count := tokenize(t, f.EngineURLs[0], "m-a", prompt)
	for _, over := range []int{0, 1} {
		maxTokens := conformanceLimit - count + over
		_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "m-a",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}, MaxTokens: openai.Int(int64(maxTokens))})
		switch {
		case over == 0 && err != nil:
			t.Errorf("prompt of %d tokens with max_tokens %d (the limit, %d): %v", count, maxTokens, conformanceLimit, err)
		case over == 1 && (!errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "maximum context length is 512")):
			t.Errorf("one token past the limit: %v, want the engine's 400", err)
		}
	}
}

// tokenize asks an engine's POST /tokenize how many tokens a chat prompt has.
func tokenize(t *testing.T, engineURL, model, prompt string) int {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "messages": []map[string]string{{"role": "user", "content": prompt}}})
	resp, err := http.Post(engineURL+"/tokenize", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Count int `json:"count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Count <= 0 {
		t.Fatalf("/tokenize: %d %v", resp.StatusCode, err)
	}
	return out.Count
}

// metricName finds the metric names a PromQL query uses: Stargate's and
// the engines' families.
var metricName = regexp.MustCompile(`\b(?:stargate|vllm|sglang)_[A-Za-z0-9_:]+`)

// TestDashboardQueriesNameExportedMetrics checks that every query of the
// Grafana dashboard names at least one metric, and only metrics the
// services export: the router's and the gateways' real /metrics, scraped
// in-process after streaming and non-streaming traffic and an error.
func TestDashboardQueriesNameExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "stargate.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("stargate.json: %v", err)
	}
	f := startTwoModels(t)
	for _, stream := range []bool{false, true} {
		for _, m := range []string{"m-a", "m-b", "m-c"} {
			body := fmt.Sprintf(`{"model":%q,"stream":%v,"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`, m, stream)
			resp, err := http.Post(f.RouterURLs[0]+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = bytes.NewBuffer(nil).ReadFrom(resp.Body)
			resp.Body.Close()
		}
	}
	exported := map[string]bool{}
	for _, u := range append([]string{f.RouterURLs[0]}, f.GatewayURLs...) {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("%s/metrics: %v", u, err)
		}
		for name, fam := range fams {
			exported[name] = true
			if fam.GetType().String() == "HISTOGRAM" {
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					exported[name+s] = true
				}
			}
		}
	}
	queries := 0
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			queries++
			names := metricName.FindAllString(tg.Expr, -1)
			if len(names) == 0 {
				t.Errorf("panel %q: query %q names no Stargate metric", p.Title, tg.Expr)
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("panel %q: query %q names %s, which no service exports", p.Title, tg.Expr, n)
				}
			}
		}
	}
	if queries == 0 {
		t.Fatal("the dashboard has no queries")
	}
}
