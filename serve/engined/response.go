package engined

import (
	"strings"

	"github.com/cespare/xxhash/v2"
)

func hashString(s string) uint64 { return xxhash.Sum64String(s) }

// response builds the JSON bodies of one request's answer.
type response struct {
	chat       bool
	id         string
	created    int64
	model      string
	seed       uint64
	promptHash uint64
	prompt     int
	cached     int
}

func (r *response) text(from, to int) string {
	var b strings.Builder
	for i := from; i < to; i++ {
		b.WriteString(word(r.seed, r.promptHash, i))
	}
	return b.String()
}

func (r *response) object(suffix string) string {
	if r.chat {
		return "chat.completion" + suffix
	}
	return "text_completion"
}

func (r *response) usage(completion int) map[string]any {
	return map[string]any{"prompt_tokens": r.prompt, "completion_tokens": completion, "total_tokens": r.prompt + completion,
		"prompt_tokens_details": map[string]any{"cached_tokens": r.cached}}
}

func (r *response) envelope(object string, choices []map[string]any) map[string]any {
	return map[string]any{"id": r.id, "object": object, "created": r.created, "model": r.model, "choices": choices}
}

// full is the non-streaming answer. Generation always runs to max_tokens.
func (r *response) full(completion int) map[string]any {
	choice := map[string]any{"index": 0, "finish_reason": "length"}
	if r.chat {
		choice["message"] = map[string]any{"role": "assistant", "content": r.text(0, completion)}
	} else {
		choice["text"] = r.text(0, completion)
	}
	body := r.envelope(r.object(""), []map[string]any{choice})
	body["usage"] = r.usage(completion)
	return body
}

// chunk carries tokens [from, to).
func (r *response) chunk(from, to int, first bool) map[string]any {
	choice := map[string]any{"index": 0, "finish_reason": nil}
	if r.chat {
		delta := map[string]any{"content": r.text(from, to)}
		if first {
			delta["role"] = "assistant"
		}
		choice["delta"] = delta
	} else {
		choice["text"] = r.text(from, to)
	}
	return r.envelope(r.object(".chunk"), []map[string]any{choice})
}

func (r *response) final() map[string]any {
	choice := map[string]any{"index": 0, "finish_reason": "length"}
	if r.chat {
		choice["delta"] = map[string]any{}
	} else {
		choice["text"] = ""
	}
	return r.envelope(r.object(".chunk"), []map[string]any{choice})
}

func (r *response) usageChunk(completion int) map[string]any {
	body := r.envelope(r.object(".chunk"), []map[string]any{})
	body["usage"] = r.usage(completion)
	return body
}
