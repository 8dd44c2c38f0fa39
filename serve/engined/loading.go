package engined

import (
	"net/http"
	"strings"
	"time"

	"github.com/stargate-llm/stargate/serve/openai"
)

// loading reports whether the engine is still loading its weights
// (Config.LoadTime after New).
func (s *Server) loading() bool {
	return s.cfg.LoadTime > 0 && time.Since(s.start) < s.cfg.LoadTime
}

// health answers GET /health: 200 once loaded, 503 before.
func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	if s.loading() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// whileLoading answers, while the engine loads, /v1/models with an empty
// list and every other /v1 call 503 with Retry-After.
func (s *Server) whileLoading(next http.Handler) http.Handler {
	if s.cfg.LoadTime <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.loading() || !strings.HasPrefix(r.URL.Path, "/v1/") {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			openai.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{}})
			return
		}
		w.Header().Set("Retry-After", "1")
		openai.WriteError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "the engine is loading its model")
	})
}
