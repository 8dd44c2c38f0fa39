package gatewayd

import (
	"net/http"

	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/openai"
	"github.com/stargate-llm/stargate/serve/wire"
)

// keyring is the gateway's keys: Config.Keys, else Config.Key alone (the
// older one-key format, every role); nil without either.
func (c *Config) keyring() *auth.Keyring { return auth.RingOf(c.Key, c.Keys) }

// initAuth sets up the gateway's signer (stats to routers, the gateway
// role's newest key), its verifier (operators' calls and routers' requests,
// addressed to "gateway/ID") and the data plane's authenticators.
func (s *Server) initAuth() {
	s.callers = append(s.callers, s.cfg.Authenticators...)
	if s.cfg.APIKeys != nil {
		s.callers = append(s.callers, s.cfg.APIKeys)
	}
	ring := s.cfg.keyring()
	if ring == nil {
		return
	}
	if k, ok := ring.Signing(auth.RoleGateway); ok {
		s.signer = auth.NewSigner(k, s.cfg.ID)
	}
	s.ops = auth.NewVerifier(auth.Audience("gateway", s.cfg.ID), auth.DefaultMaxSkew, ring.Keys()...)
	s.callers = append(s.callers, auth.RouterSignatures{V: s.ops})
}

// openDataPlane reports whether the gateway serves completions to anyone:
// when told so, or when it has no means to tell callers apart (no keys, no
// API keys, no other authenticator).
func (s *Server) openDataPlane() bool { return s.cfg.OpenDataPlane || len(s.callers) == 0 }

// admit decides who sent a completion request, in two steps: before its
// body is read (bodyless proofs, such as an API key or a client
// certificate) and after (a signature, which covers the body). It returns
// the caller's router id for the core's counts ("" for a client), and
// false once it has answered the request as unauthorized.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, body []byte, read bool) (router string, ok bool) {
	if _, inProcess := openai.ReadFrom(r.Context()); inProcess {
		return r.Header.Get(wire.HeaderRouter), true // a router in this process
	}
	if s.openDataPlane() {
		return s.openCaller(r, body, read), true
	}
	needBody := false
	for _, a := range s.callers {
		if a.NeedsBody(r) {
			needBody = true
			if !read {
				continue
			}
			if c, ok := a.Authenticate(r, body); ok {
				return c.Name, true
			}
		} else if c, ok := a.Authenticate(r, nil); ok {
			return c.Name, true
		}
	}
	if !read && needBody {
		return "", true // decided once the body is read
	}
	s.met.authRejected.Inc()
	s.rejectNow(w, http.StatusUnauthorized, ReasonUnauthorized,
		"this gateway serves routers (a signed request or a router certificate) and clients with an API key (Authorization: Bearer KEY)", 0)
	return "", false
}

// guardInfo serves h (/metrics) only to an authenticated caller when the
// data plane is closed, unless Config.OpenInfo.
func (s *Server) guardInfo(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.OpenInfo || s.openDataPlane() {
			h.ServeHTTP(w, r)
			return
		}
		for _, a := range s.callers {
			if !a.NeedsBody(r) {
				if _, ok := a.Authenticate(r, nil); ok {
					h.ServeHTTP(w, r)
					return
				}
			}
		}
		if s.ops != nil && auth.Signed(r) {
			if _, ok := (auth.RouterSignatures{V: s.ops}).Authenticate(r, nil); ok {
				h.ServeHTTP(w, r)
				return
			}
		}
		http.Error(w, "this endpoint needs an API key (Authorization: Bearer KEY); start the gateway with --open-info to serve it to anyone", http.StatusUnauthorized)
	})
}

// nameBackend names this gateway in X-Stargate-Backend, if
// Config.ExposeBackend asks for it.
func (s *Server) nameBackend(w http.ResponseWriter) {
	if s.cfg.ExposeBackend {
		w.Header().Set(wire.HeaderBackend, s.cfg.ID)
	}
}
