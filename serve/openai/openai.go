package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	"github.com/stargate-llm/stargate/gateway"
	"github.com/stargate-llm/stargate/router"
)

// Message is one chat message.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Request is the part of a completions request body Stargate reads.
type Request struct {
	Model               string          `json:"model"`
	Messages            []Message       `json:"messages"`
	Prompt              json.RawMessage `json:"prompt"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Stream              bool            `json:"stream"`
	StreamOptions       *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N    *int   `json:"n"`
	User string `json:"user"`
}

// Text reads a message content: a string, or a list of parts with "text".
func Text(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if s, ok := plainString(raw); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content must be a string or a list of text parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q is not supported; only text", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// plainString reads a JSON string literal with no escapes, quotes or control
// characters in it and valid UTF-8: its value is the bytes between the
// quotes. Most prompts are such strings; reading them so is several times
// cheaper than the JSON decoder, which the router, the gateway and the engine
// would each run over every prompt once more.
func plainString(raw []byte) (string, bool) {
	n := len(raw)
	if n < 2 || raw[0] != '"' || raw[n-1] != '"' {
		return "", false
	}
	body := raw[1 : n-1]
	for _, c := range body {
		if c == '"' || c == '\\' || c < 0x20 {
			return "", false
		}
	}
	if !utf8.Valid(body) {
		return "", false
	}
	return string(body), true
}

// PromptTokens returns the prompt's token count (see CountTokens), the text that
// keys its session by default (the first two messages, or the prompt's first
// 2 KiB) and the whole prompt text. chat selects messages over prompt.
func (req *Request) PromptTokens(chat bool) (tokens int, lead, all string, err error) {
	if chat {
		if len(req.Messages) == 0 {
			return 0, "", "", errors.New("messages must hold at least one message")
		}
		var b strings.Builder
		for i, m := range req.Messages {
			switch m.Role {
			case "system", "user", "assistant", "tool", "developer":
			default:
				return 0, "", "", fmt.Errorf("messages[%d]: unknown role %q", i, m.Role)
			}
			t, err := Text(m.Content)
			if err != nil {
				return 0, "", "", fmt.Errorf("messages[%d]: %w", i, err)
			}
			tokens += 4 + CountTokens(t)
			b.WriteString(m.Role + ":" + t + "\n")
			if i == 1 || len(req.Messages) == 1 {
				lead = b.String()
			}
		}
		return tokens, lead, b.String(), nil
	}
	var p string
	if err := json.Unmarshal(req.Prompt, &p); err != nil {
		var list []string
		if err2 := json.Unmarshal(req.Prompt, &list); err2 != nil || len(list) != 1 {
			return 0, "", "", errors.New("prompt must be a string (or a list of one string)")
		}
		p = list[0]
	}
	if p == "" {
		return 0, "", "", errors.New("prompt is empty")
	}
	return CountTokens(p), p[:min(len(p), 2048)], p, nil
}

// CountTokens is the documented stand-in for a tokenizer: 4 bytes a token.
func CountTokens(s string) int { return (len(s) + 3) / 4 }

// WriteJSON writes v as a JSON answer with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError writes an error in the shape of vLLM's OpenAI server (since it
// adopted OpenAI's own): {"error": {"message", "type", "param", "code"}}.
func WriteError(w http.ResponseWriter, status int, typ, msg string) {
	if status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge || status == http.StatusNotFound {
		w.Header().Set("x-should-retry", "false")
	}
	WriteJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": status}})
}

// SessionKey is the hash of X-Session-ID, else of the body's user, else of
// the leading messages.
func SessionKey(h http.Header, user string, lead string) uint64 {
	if h := h.Get("X-Session-ID"); h != "" {
		return router.SessionIDKey(h)
	}
	if user != "" {
		return xxhash.Sum64String("u:" + user)
	}
	return xxhash.Sum64String("m:" + lead)
}

// WriteStreamError ends an SSE stream with an error event and [DONE], so a
// failure after the first byte is never a silently truncated stream.
func WriteStreamError(w http.ResponseWriter, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "APIConnectionError", "code": 502}})
	_, _ = fmt.Fprintf(w, "data: %s\n\ndata: [DONE]\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// ContextLimit reads the limit out of an engine's context-length refusal
// in one of vLLM's or SGLang's own forms (gateway.ParseLimitBody: the
// error message must start with the form, so a client's value an engine
// quotes never counts); -1 if the body is not one.
func ContextLimit(body []byte) int {
	ev, ok := gateway.ParseLimitBody(body)
	if !ok {
		return -1
	}
	return ev.Limit
}

// Read is what a router read from a request: its prompt tokens and session
// key. A router that calls a gateway in its own process passes it in the
// request's context, so that the gateway need not parse the body again.
type Read struct {
	Prompt  int
	Session uint64
}

type readKey struct{}

// WithRead returns ctx carrying rd. Only code in the process can set it: a
// context never crosses a connection.
func WithRead(ctx context.Context, rd Read) context.Context {
	return context.WithValue(ctx, readKey{}, rd)
}

// ReadFrom returns what WithRead put in ctx.
func ReadFrom(ctx context.Context) (Read, bool) {
	rd, ok := ctx.Value(readKey{}).(Read)
	return rd, ok
}
