package engined

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/stargate-llm/stargate/internal/mix"
	"github.com/stargate-llm/stargate/serve/openai"
)

// Compat selects whose behaviour the engine copies where engines differ.
type Compat string

// Compatibility modes.
const (
	// CompatStargate is the mock engine as Stargate's own tests and studies
	// use it: several workers behind one URL (X-Stargate-Worker), a signed
	// idle fence, a mock DCGM exporter.
	CompatStargate Compat = ""
	// CompatVLLM behaves like a real vLLM OpenAI server where it differs:
	// one worker per URL, no fence (/admin/fence is 404), vLLM's error texts
	// (validation errors that repeat the client's input; its context-length
	// errors), POST /tokenize, /v1/models entries with created, owned_by
	// "vllm" and max_model_len, no stargate_* metrics and no max_num_seqs
	// label (real vLLM exports neither), FastAPI's {"detail": ...} 404 and
	// 405 answers. A restart, like any restart, loses everything in flight.
	CompatVLLM Compat = "vllm"
)

// ParseCompat reads a --compat value.
func ParseCompat(s string) (Compat, error) {
	switch strings.ToLower(s) {
	case "", "stargate":
		return CompatStargate, nil
	case "vllm":
		return CompatVLLM, nil
	}
	return "", fmt.Errorf("compat %q: want stargate or vllm", s)
}

// vllm reports whether the engine copies vLLM.
func (s *Server) vllm() bool { return s.cfg.Compat == CompatVLLM }

// requireAPIKey wraps h as vLLM's --api-key does: every path under /v1 needs
// "Authorization: Bearer KEY"; others (/health, /metrics, /tokenize) stay
// open. A wrong or missing key is a 401 {"error": "Unauthorized"}.
func requireAPIKey(key string, h http.Handler) http.Handler {
	want := []byte("Bearer " + key)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1") && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			openai.WriteJSON(w, http.StatusUnauthorized, map[string]any{"error": "Unauthorized"})
			return
		}
		h.ServeHTTP(w, r)
	})
}

// detailMux answers unknown paths and wrong methods as FastAPI does
// ({"detail": "Not Found"}, {"detail": "Method Not Allowed"}), as vLLM's
// server does.
type detailMux struct{ mux *http.ServeMux }

func (d detailMux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, pattern := d.mux.Handler(r)
	if pattern == "" {
		rec := &statusProbe{}
		h.ServeHTTP(rec, r) // the mux's own 404 or 405, to tell which
		if rec.status == http.StatusMethodNotAllowed {
			if allow := rec.Header().Get("Allow"); allow != "" {
				w.Header().Set("Allow", allow)
			}
			openai.WriteJSON(w, http.StatusMethodNotAllowed, map[string]any{"detail": "Method Not Allowed"})
			return
		}
		openai.WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
		return
	}
	d.mux.ServeHTTP(w, r)
}

// statusProbe records what a handler would answer, writing nothing.
type statusProbe struct {
	h      http.Header
	status int
}

func (p *statusProbe) Header() http.Header {
	if p.h == nil {
		p.h = http.Header{}
	}
	return p.h
}
func (p *statusProbe) Write(b []byte) (int, error) { return len(b), nil }
func (p *statusProbe) WriteHeader(code int)        { p.status = code }

// validationError is vLLM's 400 for a body its schema refuses: pydantic's
// error list, which repeats the client's input, as the message.
func validationError(w http.ResponseWriter, kind, loc, msg string, input any) {
	in, _ := json.Marshal(input)
	openai.WriteError(w, http.StatusBadRequest, "BadRequestError",
		fmt.Sprintf("[{'type': '%s', 'loc': ('body', %s), 'msg': '%s', 'input': %s}]", kind, loc, msg, in))
}

// contextError is the engine's 400 for a prompt that does not fit: vLLM's
// current wording in vLLM mode, its older one otherwise. Both name the limit
// as "maximum context length is N tokens", which gateways read.
func (s *Server) contextError(w http.ResponseWriter, limit, prompt, maxTokens int, named bool) {
	var msg string
	switch {
	case !s.vllm():
		msg = fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
			limit, uint64(prompt)+uint64(maxTokens), prompt, maxTokens)
	case prompt >= limit || !named:
		msg = fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. Please reduce the length of the input messages.", limit, prompt)
	default:
		msg = fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens and your request has %d input tokens (%d > %d - %d).",
			maxTokens, limit, prompt, maxTokens, limit, prompt)
	}
	openai.WriteError(w, http.StatusBadRequest, "BadRequestError", msg)
}

// tokenize serves POST /tokenize as vLLM does: {"model", "prompt"} or
// {"model", "messages"} in; {"count", "max_model_len", "tokens",
// "token_strs"} out, counted as the engine counts (package openai's
// stand-in tokenizer). Token ids are a deterministic function of the text.
func (s *Server) tokenize(w http.ResponseWriter, r *http.Request) {
	var req openai.Request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)).Decode(&req); err != nil {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", "request body is not valid JSON: "+err.Error())
		return
	}
	if req.Model != "" && req.Model != s.cfg.Model {
		openai.WriteError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", req.Model))
		return
	}
	count, _, all, err := req.PromptTokens(len(req.Messages) > 0)
	if err != nil {
		openai.WriteError(w, http.StatusBadRequest, "BadRequestError", err.Error())
		return
	}
	tokens := make([]uint32, count)
	h := hashString(all)
	for i := range tokens {
		tokens[i] = uint32(mix.Mix64(h^uint64(i)) % 128000)
	}
	openai.WriteJSON(w, http.StatusOK, map[string]any{"count": count, "max_model_len": s.cfg.MaxModelLen,
		"tokens": tokens, "token_strs": nil})
}
