package auth

import "net/http"

// Caller is who a data-plane request proved to be.
type Caller struct {
	// Kind is how it proved it: CallerRouter (a router's signature, or a
	// verified client certificate with the router role), CallerClient (a
	// client API key) or CallerInProcess.
	Kind CallerKind
	// Name is the router's id (CallerRouter); empty otherwise.
	Name string
}

// CallerKind says how a caller proved itself.
type CallerKind string

// The kinds of caller.
const (
	CallerRouter    CallerKind = "router"
	CallerClient    CallerKind = "client"
	CallerInProcess CallerKind = "in-process"
)

// Authenticator decides whether a data-plane request comes from someone
// allowed: ok false means it proved nothing (another Authenticator may
// still accept it). body is the request's body, already read (nil if the
// authenticator says it needs none, see NeedsBody). Package auth's API
// keys and router signatures are Authenticators; a verified client
// certificate (mutual TLS) can be one too.
type Authenticator interface {
	Authenticate(r *http.Request, body []byte) (Caller, bool)
	// NeedsBody reports whether Authenticate must see r's body to decide
	// (a signature covers it); those run after the body is read.
	NeedsBody(r *http.Request) bool
}

// Authenticate accepts a request with a known client API key.
func (k *APIKeys) Authenticate(r *http.Request, _ []byte) (Caller, bool) {
	if k.Allowed(r) {
		return Caller{Kind: CallerClient}, true
	}
	return Caller{}, false
}

// NeedsBody is false: an API key is in the header.
func (k *APIKeys) NeedsBody(*http.Request) bool { return false }

// RouterSignatures accepts requests a router signed with a router-role key
// for this verifier's service (Verifier.Check: out-of-order arrivals
// allowed, each once).
type RouterSignatures struct{ V *Verifier }

// Authenticate checks r's signature over body.
func (a RouterSignatures) Authenticate(r *http.Request, body []byte) (Caller, bool) {
	if !Signed(r) {
		return Caller{}, false
	}
	msg, err := a.V.Check(r, body, RoleRouter)
	if err != nil {
		return Caller{}, false
	}
	return Caller{Kind: CallerRouter, Name: msg.Sender}, true
}

// NeedsBody is true for a signed request whose headers could be valid
// (Verifier.Plausible): one that cannot be is refused without its body
// being read.
func (a RouterSignatures) NeedsBody(r *http.Request) bool {
	return Signed(r) && a.V.Plausible(r, RoleRouter)
}
