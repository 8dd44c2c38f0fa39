// Package engine is the live shell of the engine model: an OpenAI-compatible
// HTTP server whose GPU workers are the engine and cluster cores running on
// the real clock. It streams tokens at the pace of the model's steps.
//
// Endpoints: POST /v1/chat/completions and POST /v1/completions (streaming
// with server-sent events ending in "data: [DONE]", stream_options
// include_usage, or one JSON answer), GET /v1/models (with max_model_len) and
// GET /health.
//
// Tokens are counted without a tokenizer, deterministically: a text of n
// bytes is (n+3)/4 tokens, and each chat message adds 4 tokens for its role
// and framing. A prompt longer than max_model_len, or one whose prompt plus
// max_tokens does not fit, is refused with vLLM's 400 error. Output text is a
// deterministic sequence of words drawn from the server's seed and the
// prompt, so the same seed and request give the same answer.
//
// The prefix cache is keyed by session: the X-Session-ID header, else the
// body's "user", else a hash of the first two messages (a growing
// conversation keeps its first messages).
package engine
