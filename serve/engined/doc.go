// Package engined is the live shell of the engine model: an OpenAI-compatible
// HTTP server whose GPU workers are the engine and cluster cores running on
// the real clock. It streams tokens at the pace of the model's steps.
//
// Endpoints: POST /v1/chat/completions and POST /v1/completions (streaming
// with server-sent events ending in "data: [DONE]", stream_options
// include_usage, or one JSON answer), GET /v1/models (with max_model_len),
// GET /health and GET /metrics with vLLM's metric names:
// vllm:num_requests_running, vllm:num_requests_waiting,
// vllm:kv_cache_usage_perc, vllm:prefix_cache_queries_total,
// vllm:prefix_cache_hits_total (prompt tokens looked up and found),
// vllm:prompt_tokens_total, vllm:generation_tokens_total,
// vllm:time_to_first_token_seconds, vllm:e2e_request_latency_seconds and
// vllm:cache_config_info.
//
// Tokens are counted as package openai documents (4 bytes a token, 4 more
// per chat message). A prompt longer than max_model_len, or one whose prompt plus
// max_tokens does not fit, is refused with vLLM's 400 error. Output text is a
// deterministic sequence of words drawn from the server's seed and the
// prompt, so the same seed and request give the same answer.
//
// POST /tokenize counts a prompt or messages as the engine does, in vLLM's
// shape. Config.Compat = CompatVLLM behaves like a real vLLM where the two
// differ (one worker, no fence, vLLM's error texts, FastAPI's 404/405);
// Config.APIKey requires a bearer token on /v1 paths, as vLLM's --api-key.
//
// The prefix cache is keyed by openai.SessionKey. A gateway that picks the
// worker itself names it in the X-Stargate-Worker header.
package engined
