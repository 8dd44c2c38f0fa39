package fleet

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/gatewayd"
)

// streamTokens sends one streamed chat completion of maxTokens to url and
// returns the words of its content, the usage's completion tokens and
// whether the stream ended with [DONE].
func streamTokens(ctx context.Context, url, session string, maxTokens int) (words, usage int, done bool, err error) {
	body := fmt.Sprintf(`{"model":"stargate-mock","stream":true,"stream_options":{"include_usage":true},"max_tokens":%d,"messages":[{"role":"user","content":"tell me about %s"}]}`, maxTokens, session)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		return 0, 0, false, err
	}
	req.Header.Set("X-Session-ID", session)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, false, fmt.Errorf("status %s", resp.Status)
	}
	var content strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var ev struct {
			Choices []struct {
				Delta struct{ Content string } `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return 0, 0, false, fmt.Errorf("event %q: %w", data, err)
		}
		for _, c := range ev.Choices {
			content.WriteString(c.Delta.Content)
		}
		if ev.Usage != nil {
			usage = ev.Usage.CompletionTokens
		}
	}
	return len(strings.Fields(content.String())), usage, done, sc.Err()
}

// TestEngineTransportsLive: a live fleet runs streamed requests end to end
// the same whichever way its gateways reach the engines, net/http (the
// default) or the h1 client: every answer whole, with as many tokens as
// asked for, counted once at every hop.
func TestEngineTransportsLive(t *testing.T) {
	for _, et := range gatewayd.EngineTransports() {
		t.Run(string(et), func(t *testing.T) {
			reg := policy.NewRegistry()
			fl, _ := config.Preset("small")
			cfg, err := fl.SimConfig(config.Run{Policy: "least-request", RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second) // a hang guard
			defer cancel()
			f, err := Start(ctx, cfg, reg, Options{Seed: 1, EngineTransport: et})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Stop()
			for _, g := range f.Gateways {
				if got := g.EngineTransport(); got != et {
					t.Fatalf("a gateway reaches its engine with %s, want %s", got, et)
				}
			}
			const n = 24
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				wg.Go(func() {
					want := 3 + i%13
					words, usage, done, err := streamTokens(ctx, f.RouterURLs[0], fmt.Sprintf("s%d", i%5), want)
					switch {
					case err != nil:
						errs <- fmt.Errorf("request %d: %w", i, err)
					case !done || words != want || usage != want:
						errs <- fmt.Errorf("request %d: %d words, usage %d, [DONE] %v; want %d tokens and [DONE]", i, words, usage, done, want)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			var gwCompleted, engCompleted uint64
			for _, g := range f.Gateways {
				c := g.Counts()
				gwCompleted += c.Completed
				if len(c.Failed) > 0 {
					t.Errorf("gateway failures %v", c.Failed)
				}
			}
			for _, e := range f.Engines {
				engCompleted += e.Counts().Completed
			}
			if rc := f.Routers[0].Counts(); rc.Completed != n || gwCompleted != n || engCompleted < n {
				t.Errorf("completed: router %d, gateways %d, engines %d; want %d each", rc.Completed, gwCompleted, engCompleted, n)
			}
		})
	}
}
