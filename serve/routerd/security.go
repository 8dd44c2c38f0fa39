package routerd

import (
	"net/http"

	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
)

// keyring is the router's keys: Config.Keys, else Config.Key alone (the
// older one-key format, every role); nil without either.
func (c *Config) keyring() *auth.Keyring {
	return auth.RingOf(c.Key, c.Keys)
}

// initAuth sets up the router's verifier (gateways' stats, operators'
// admin calls, both addressed to "router/ID") and its signer for requests
// to gateways (the router role's newest key), from its keys.
func (s *Server) initAuth() {
	ring := s.cfg.keyring()
	if ring == nil {
		return
	}
	s.verify = auth.NewVerifier(auth.Audience("router", s.cfg.ID), auth.DefaultMaxSkew, ring.Keys()...)
	if k, ok := ring.Signing(auth.RoleRouter); ok {
		s.signer = auth.NewSigner(k, s.cfg.ID)
	}
}

// signUpstream signs a request to backend for that gateway ("gateway/NAME"),
// so that it can tell a router from a client.
func (s *Server) signUpstream(up *http.Request, body []byte, backend string) {
	if s.signer != nil {
		s.signer.Sign(up, body, auth.Audience("gateway", backend))
	}
}

// guardInfo serves h (the backend list, /metrics) only to a caller with a
// client API key or an operator's signature, when the router has API keys,
// unless Config.OpenInfo.
func (s *Server) guardInfo(h http.Handler) http.Handler {
	if s.cfg.APIKeys == nil || s.cfg.OpenInfo {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.cfg.APIKeys.Allowed(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="stargate"`)
			http.Error(w, "this endpoint needs an API key (Authorization: Bearer KEY); start the router with --open-info to serve it to anyone", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// hideBackend drops the X-Stargate-Backend header from every answer unless
// Config.ExposeBackend: clients learn no backend names.
func (s *Server) hideBackend(h http.Handler) http.Handler {
	if s.cfg.ExposeBackend {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&hidingWriter{ResponseWriter: w}, r)
	})
}

// hidingWriter removes X-Stargate-Backend before the header goes out.
type hidingWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *hidingWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		w.ResponseWriter.Header().Del(wire.HeaderBackend)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *hidingWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *hidingWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *hidingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ID is the replica's id, which admin calls name as their audience
// ("router/ID").
func (s *Server) ID() string { return s.cfg.ID }
