package engined

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestOpenAIClientConformance talks to the mock engine with the official
// OpenAI Go client: what it parses is what real clients will see.
func TestOpenAIClientConformance(t *testing.T) {
	_, url := start(t, nil)
	client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:     "stargate-mock",
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be brief."), openai.UserMessage("Route me.")},
		MaxTokens: openai.Int(5),
	}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 1 || len(strings.Fields(resp.Choices[0].Message.Content)) != 5 ||
		resp.Usage.CompletionTokens != 5 || resp.Usage.PromptTokens == 0 || resp.Choices[0].FinishReason != "length" {
		t.Fatalf("response %+v", resp)
	}

	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != resp.Choices[0].Message.Content || acc.Usage.CompletionTokens != 5 {
		t.Errorf("streamed %q (usage %+v), want %q", acc.Choices[0].Message.Content, acc.Usage, resp.Choices[0].Message.Content)
	}

	// A prompt past max_model_len: the client sees a 400 with vLLM's message.
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
	params.MaxTokens = openai.Int(100_000)
	_, err = client.Chat.Completions.New(ctx, params)
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Message, "maximum context length") {
		t.Errorf("over-long request: %v", err)
	}
}
