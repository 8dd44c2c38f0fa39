package routerd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/stargate-llm/stargate/serve/openai"
)

// passthroughPattern takes every other POST under /v1 that names a model
// (/v1/responses, /v1/embeddings, /v1/rerank, ...): the router places it by
// model and session and proxies it unchanged, streaming included.
const passthroughPattern = "POST /v1/"

// maxSessionLead bounds the part of a passthrough body's input that keys
// its session when neither X-Session-ID nor user is given.
const maxSessionLead = 512

// passthrough places a model-bearing POST the router does not read beyond
// its model, stream, user and size: its prompt tokens are estimated from the
// body's bytes (openai.CountTokens), which only orders candidates.
func (s *Server) passthrough(w http.ResponseWriter, r *http.Request) {
	s.accept()
	if s.cfg.APIKeys != nil && !s.cfg.APIKeys.Allowed(r) {
		s.reject(w, http.StatusUnauthorized, ReasonUnauthorized, "missing or unknown API key; send Authorization: Bearer KEY")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.reject(w, http.StatusRequestEntityTooLarge, ReasonBadRequest, fmt.Sprintf("request body is larger than %d bytes", s.cfg.MaxBodyBytes))
			return
		}
		s.reject(w, http.StatusBadRequest, ReasonBadRequest, "reading the request body: "+err.Error())
		return
	}
	var req struct {
		Model           string          `json:"model"`
		Stream          bool            `json:"stream"`
		User            string          `json:"user"`
		Input           json.RawMessage `json:"input"`
		MaxOutputTokens *int            `json:"max_output_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		s.reject(w, http.StatusBadRequest, ReasonBadRequest, "request body is not a JSON object: "+err.Error())
		return
	}
	if req.Model == "" {
		s.end(ReasonBadRequest, false)
		openai.WriteError(w, http.StatusNotFound, "NotFoundError",
			fmt.Sprintf("router: no route for POST %s without a model; this router places POSTs under /v1 by their \"model\"", r.URL.Path))
		return
	}
	lead := req.Input
	if len(lead) > maxSessionLead {
		lead = lead[:maxSessionLead]
	}
	prompt := openai.CountTokens(string(body))
	tokens := prompt
	if v := req.MaxOutputTokens; v != nil && *v > 0 && *v <= s.cfg.MaxTokensLimit {
		tokens += *v
	}
	session := openai.SessionKey(r.Header, req.User, r.URL.Path+"\x00"+string(lead))
	s.route(w, r, body, want{session: session, prompt: prompt, tokens: tokens, model: req.Model}, req.Stream)
}

// apiErrors answers, in OpenAI's error shape, every request mux has no
// route for: 404 for an unknown path, 405 (with Allow) for a known path and
// the wrong method, a POST under /v1 to a path served by another method
// included; everything else goes to mux.
func apiErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern == passthroughPattern {
			// POST /v1/models and the like: a path served by GET.
			get := r.Clone(r.Context())
			get.Method = http.MethodGet
			if _, p := mux.Handler(get); p != "" && p != passthroughPattern {
				w.Header().Set("Allow", "GET, HEAD")
				openai.WriteError(w, http.StatusMethodNotAllowed, "MethodNotAllowedError",
					fmt.Sprintf("router: %s %s is not allowed; use GET", r.Method, r.URL.Path))
				return
			}
		}
		if pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		rec := &statusRecorder{header: http.Header{}}
		h.ServeHTTP(rec, r) // the mux's own 404 or 405, for its status and Allow
		switch rec.status {
		case http.StatusMethodNotAllowed:
			w.Header().Set("Allow", rec.header.Get("Allow"))
			openai.WriteError(w, http.StatusMethodNotAllowed, "MethodNotAllowedError",
				fmt.Sprintf("router: %s %s is not allowed; allowed: %s", r.Method, r.URL.Path, rec.header.Get("Allow")))
		case http.StatusNotFound:
			openai.WriteError(w, http.StatusNotFound, "NotFoundError",
				fmt.Sprintf("router: no route for %s %s", r.Method, r.URL.Path))
		default: // a redirect (a path to clean): the mux's answer as it is
			mux.ServeHTTP(w, r)
		}
	})
}

// statusRecorder keeps a handler's status and header and drops its body.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
func (r *statusRecorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}

// modelCreated is when this router first listed model in /v1/models, in
// Unix seconds (OpenAI's created): stable across calls. Called with mu held.
func (s *Server) modelCreated(model string, now time.Time) int64 {
	if s.created == nil {
		s.created = map[string]int64{}
	}
	c, ok := s.created[model]
	if !ok {
		c = now.Unix()
		s.created[model] = c
	}
	return c
}
