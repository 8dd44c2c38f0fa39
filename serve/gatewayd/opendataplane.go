package gatewayd

import "net/http"

// Unauthenticated is the router name an open data plane counts a request
// under when it proves nothing: never the client's own X-Stargate-Router,
// which anyone can set.
const Unauthenticated = "unauthenticated"

// openCaller names the sender of a request on an open data plane (served
// whatever it proves): a router's verified signature names that router, a
// client API key no router (""), anything else Unauthenticated. Before the
// body is read (read false) it names no one: the name is taken after.
func (s *Server) openCaller(r *http.Request, body []byte, read bool) string {
	if !read {
		return ""
	}
	for _, a := range s.callers {
		if c, ok := a.Authenticate(r, body); ok {
			return c.Name
		}
	}
	return Unauthenticated
}
