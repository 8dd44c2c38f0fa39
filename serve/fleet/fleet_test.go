package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.uber.org/goleak"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startSmall starts the built-in small fleet under policy pol.
func startSmall(t *testing.T, pol string) *Fleet {
	t.Helper()
	reg := policy.NewRegistry()
	fl, _ := config.Preset("small")
	cfg, err := fl.SimConfig(config.Run{Policy: pol, RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := Start(ctx, cfg, reg, Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	return f
}

// TestOpenAIClientThroughFleet sends requests with the official OpenAI Go
// client through router -> gateway -> engine, streaming and not.
func TestOpenAIClientThroughFleet(t *testing.T) {
	f := startSmall(t, "pulsar-waw")
	client := openai.NewClient(option.WithBaseURL(f.RouterURLs[0]+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:     "stargate-mock",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Route me.")},
		MaxTokens: openai.Int(7),
	}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || len(strings.Fields(resp.Choices[0].Message.Content)) != 7 || resp.Choices[0].FinishReason != "length" ||
		resp.Usage.CompletionTokens != 7 || resp.Usage.PromptTokens != 4+3+4+3 {
		t.Fatalf("response %+v", resp)
	}
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// Same session, same seed, same prompt: the same words. The second call
	// finds the first's prefix in the cache of the worker it went back to.
	if acc.Choices[0].Message.Content != resp.Choices[0].Message.Content || acc.Choices[0].FinishReason != "length" ||
		acc.Usage.CompletionTokens != 7 || chunks < 3 {
		t.Errorf("streamed %q in %d chunks (usage %+v), want %q", acc.Choices[0].Message.Content, chunks, acc.Usage, resp.Choices[0].Message.Content)
	}
	if acc.Usage.PromptTokensDetails.CachedTokens == 0 {
		t.Errorf("second turn of a session found no cached tokens: %+v", acc.Usage)
	}
	comp, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "stargate-mock",
		Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("Once upon a time")}, MaxTokens: openai.Int(3)})
	if err != nil || len(strings.Fields(comp.Choices[0].Text)) != 3 {
		t.Fatalf("completions: %+v, %v", comp, err)
	}
	models, err := client.Models.List(ctx)
	if err != nil || len(models.Data) != 1 || models.Data[0].ID != "stargate-mock" {
		t.Fatalf("models: %+v, %v", models, err)
	}
	if n := f.Routers[0].HTTP2Conns(); n == 0 {
		t.Error("the router reached no gateway over HTTP/2")
	}
	// A prompt longer than every backend's context: the engine's own 400
	// (the router never refuses on its estimate alone), which the client
	// must not retry.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage(strings.Repeat("long ", 110_000))}
	_, err = client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "maximum context length") {
		t.Errorf("over-long request: %v", err)
	}
}

// TestAccountingCloses runs concurrent requests, some of them cancelled by
// their clients mid-way, and checks that every request ends as exactly one
// of completed, failed or rejected at the router, at the gateways and at the
// engines, and that the hops agree.
func TestAccountingCloses(t *testing.T) {
	f := startSmall(t, "least-request")
	var wg sync.WaitGroup
	const n, cancelling = 60, 12
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i%4 == 3 && i%10 != 9 { // a client that gives up while its tokens stream
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 150*time.Millisecond)
				defer cancel()
			}
			body := fmt.Sprintf(`{"model":"stargate-mock","stream":%v,"max_tokens":%d,"messages":[{"role":"user","content":"request %d"}]}`, i%2 == 0, 20+i, i)
			if i%10 == 9 {
				body = `{"messages": [` // broken JSON: rejected at the router
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.RouterURLs[0]+"/v1/chat/completions", bytes.NewReader([]byte(body)))
			req.Header.Set("X-Session-ID", fmt.Sprintf("s%d", i%7))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	wg.Wait()
	// Let cancellations reach every hop.
	deadline := time.Now().Add(5 * time.Second)
	for {
		rc := f.Routers[0].Counts()
		var gwAccepted, gwEnded, engAccepted, engEnded uint64
		for _, g := range f.Gateways {
			c := g.Counts()
			gwAccepted += c.Accepted
			gwEnded += c.Completed + sum(c.Failed) + sum(c.Rejected)
		}
		for _, e := range f.Engines {
			c := e.Counts()
			engAccepted += c.Accepted
			engEnded += c.Completed + sum(c.Failed) + sum(c.Rejected)
		}
		routerEnded := rc.Completed + sum(rc.Failed) + sum(rc.Rejected)
		// A client that gives up early may not even reach the router.
		if rc.Accepted >= n-cancelling && routerEnded == rc.Accepted && gwEnded == gwAccepted && engEnded == engAccepted {
			if rc.Rejected["bad_request"] != n/10 {
				t.Errorf("router rejected %v, want %d bad requests", rc.Rejected, n/10)
			}
			// An attempt whose client gave up on the way never reaches a
			// gateway, and a client that gives up just as its answer ends may
			// leave a completion counted below it but not above: so the
			// completed counts may only shrink towards the client.
			if gwAccepted > rc.Attempts {
				t.Errorf("gateways accepted %d, router sent %d attempts", gwAccepted, rc.Attempts)
			}
			var gwCompleted, engCompleted uint64
			for _, g := range f.Gateways {
				gwCompleted += g.Counts().Completed
			}
			for _, e := range f.Engines {
				engCompleted += e.Counts().Completed
			}
			if rc.Completed != n-n/10-cancelling || rc.Completed > gwCompleted || gwCompleted > engCompleted {
				t.Errorf("completed: router %d (want %d), gateways %d, engines %d", rc.Completed, n-n/10-cancelling, gwCompleted, engCompleted)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("accounting does not close: router %+v; gateways ended %d of %d; engines ended %d of %d",
				rc, gwEnded, gwAccepted, engEnded, engAccepted)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func sum(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}
