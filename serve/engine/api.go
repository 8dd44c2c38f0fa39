package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/internal/mix"
)

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type request struct {
	Model               string          `json:"model"`
	Messages            []message       `json:"messages"`
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

// text reads a message content: a string, or a list of parts with "text".
func text(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
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

// promptOf returns the prompt's token count, the text that keys its session
// by default, and a hash input for the output text.
func promptOf(req *request, chat bool) (tokens int, lead, all string, err error) {
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
			t, err := text(m.Content)
			if err != nil {
				return 0, "", "", fmt.Errorf("messages[%d]: %w", i, err)
			}
			tokens += 4 + countTokens(t)
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
	return countTokens(p), p[:min(len(p), 2048)], p, nil
}

// countTokens is the documented stand-in for a tokenizer: 4 bytes a token.
func countTokens(s string) int { return (len(s) + 3) / 4 }

var vocabulary = strings.Fields(`the a router gateway engine token cache fleet region session model
request stream batch prefill decode worker slot queue policy weight affinity capacity latency
signal pressure backend quorum fence lease permit ring band wait overflow`)

// word is output token i of a request: deterministic in seed and prompt.
func word(seed, prompt uint64, i int) string {
	x := mix.Mix64(seed ^ prompt ^ uint64(i)*0x9e3779b97f4a7c15)
	return vocabulary[x%uint64(len(vocabulary))] + " "
}

func (s *Server) complete(w http.ResponseWriter, r *http.Request, chat bool) {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	var req request
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(&req); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			apiError(w, http.StatusRequestEntityTooLarge, "BadRequestError",
				fmt.Sprintf("request body is larger than %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		apiError(w, http.StatusBadRequest, "BadRequestError", "request body is not valid JSON: "+err.Error())
		return
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		apiError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	if req.StreamOptions != nil && !req.Stream {
		apiError(w, http.StatusBadRequest, "BadRequestError", "stream_options is only allowed when stream is true")
		return
	}
	if req.N != nil && *req.N != 1 {
		apiError(w, http.StatusBadRequest, "BadRequestError", "n must be 1: this engine returns one choice")
		return
	}
	prompt, lead, all, err := promptOf(&req, chat)
	if err != nil {
		apiError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	maxTokens := min(s.cfg.DefaultMaxTokens, s.cfg.MaxModelLen-prompt)
	for _, v := range []*int{req.MaxTokens, req.MaxCompletionTokens} {
		if v != nil {
			maxTokens = *v
		}
	}
	if maxTokens < 1 {
		if req.MaxTokens == nil && req.MaxCompletionTokens == nil {
			maxTokens = 1 // let the length check below say what is wrong
		} else {
			apiError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("max_tokens must be at least 1, got %d", maxTokens))
			return
		}
	}
	if maxTokens > s.cfg.MaxModelLen-prompt { // not prompt+maxTokens: that can overflow
		apiError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf(
			"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			s.cfg.MaxModelLen, uint64(prompt)+uint64(maxTokens), prompt, maxTokens))
		return
	}
	id, st, err := s.submit(sessionKey(r, req.User, lead), prompt, maxTokens)
	if err != nil {
		apiError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	defer s.finish(id, st)
	prefix := "cmpl"
	if chat {
		prefix = "chatcmpl"
	}
	out := response{chat: chat, id: fmt.Sprintf("%s-%d", prefix, id),
		created: time.Now().Unix(), model: s.cfg.Model, seed: s.cfg.Seed, promptHash: hashString(all), prompt: prompt}
	if req.Stream {
		s.streamOut(w, r, st, &out, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	for {
		gen, cached, done := s.read(st)
		if done {
			out.cached = cached
			writeJSON(w, http.StatusOK, out.full(gen))
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.stopped:
			apiError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "the engine is shutting down")
			return
		case <-st.notify:
		}
	}
}

func (s *Server) streamOut(w http.ResponseWriter, r *http.Request, st *stream, out *response, usage bool) {
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sent := 0
	for {
		gen, cached, done := s.read(st)
		if gen > sent {
			if err := writeEvent(w, out.chunk(sent, gen, sent == 0)); err != nil {
				return
			}
			sent = gen
		}
		if done {
			out.cached = cached
			_ = writeEvent(w, out.final())
			if usage {
				_ = writeEvent(w, out.usageChunk(gen))
			}
			_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
			if flusher != nil {
				flusher.Flush()
			}
			return
		}
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.stopped:
			// Never a silently truncated stream: say why it ends.
			_ = writeEvent(w, map[string]any{"error": map[string]any{"message": "the engine is shutting down",
				"type": "ServiceUnavailableError", "param": nil, "code": 503}})
			_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
			return
		case <-st.notify:
		}
	}
}

func writeEvent(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "data: %s\n\n", b)
	return err
}
