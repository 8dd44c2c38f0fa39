package tlsconf

import (
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Role is what a service is, as its certificate says.
type Role string

// The roles a certificate can name.
const (
	RoleRouter   Role = "router"
	RoleGateway  Role = "gateway"
	RoleEngine   Role = "engine"
	RoleOperator Role = "operator"
)

// Roles lists the known roles.
var Roles = []Role{RoleRouter, RoleGateway, RoleEngine, RoleOperator}

// TrustDomain is the host of the identities' URIs.
const TrustDomain = "stargate"

// Identity is a service's role and name, read from its certificate.
type Identity struct {
	Role Role
	Name string
}

// URI is the identity's URI SAN, spiffe://stargate/ROLE/NAME: what a
// certificate for it carries.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: TrustDomain, Path: "/" + string(id.Role) + "/" + id.Name}
}

func (id Identity) String() string { return id.URI().String() }

// ParseIdentity reads spiffe://stargate/ROLE/NAME.
func ParseIdentity(u *url.URL) (Identity, error) {
	if u.Scheme != "spiffe" || u.Host != TrustDomain {
		return Identity{}, fmt.Errorf("tlsconf: identity %q is not spiffe://%s/ROLE/NAME", u, TrustDomain)
	}
	role, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !ok || name == "" || strings.Contains(name, "/") {
		return Identity{}, fmt.Errorf("tlsconf: identity %q: want spiffe://%s/ROLE/NAME", u, TrustDomain)
	}
	for _, r := range Roles {
		if Role(role) == r {
			return Identity{Role: r, Name: name}, nil
		}
	}
	return Identity{}, fmt.Errorf("tlsconf: identity %q: unknown role %q (want router, gateway, engine or operator)", u, role)
}

// IdentityOf reads the identity of a certificate: its one URI SAN in the
// stargate trust domain. A certificate with none, or with two, has none.
func IdentityOf(cert *x509.Certificate) (Identity, bool) {
	var found Identity
	n := 0
	for _, u := range cert.URIs {
		if u.Scheme != "spiffe" || u.Host != TrustDomain {
			continue
		}
		id, err := ParseIdentity(u)
		if err != nil {
			return Identity{}, false
		}
		found = id
		n++
	}
	return found, n == 1
}

// PeerIdentity is the identity in the verified client certificate of the
// connection r came on. It is false for plain HTTP, for a client that sent
// no certificate, for one the server did not verify (no client CA) and for
// a certificate without an identity. A request a router hands to a gateway
// in its own process (router.Local) carries no TLS state: it has none.
func PeerIdentity(r *http.Request) (Identity, bool) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return Identity{}, false
	}
	return IdentityOf(r.TLS.PeerCertificates[0])
}
