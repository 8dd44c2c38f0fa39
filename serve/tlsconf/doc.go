// Package tlsconf builds the TLS configurations of Stargate's live services
// (router, gateway, engine): a server's certificate reloaded when its files
// change, the verification of upstreams (router to gateway, gateway to
// engine and to routers), and mutual TLS between routers and gateways.
//
// Identity. A service's role and name travel in its certificate as a URI
// subject alternative name spiffe://stargate/ROLE/NAME, ROLE one of router,
// gateway, engine or operator (the SPIFFE form, so that a SPIRE-issued or
// cert-manager-issued certificate can carry it). A peer's identity is read
// only from a certificate whose chain the TLS handshake verified against the
// configured CA; never from a header. PeerIdentity gives a handler the
// identity of the connection's verified client certificate, so that a data-
// plane check can accept "a router" without a signature or an API key.
//
// Mutual TLS. A server given a client CA (--client-ca-file) verifies client
// certificates against it: a router's listener serves API clients too, so it
// asks for a certificate and verifies it if one is sent (RequestClient
// false); a gateway requires one (RequireClient true). With AllowedRoles
// set, a verified certificate whose role is not listed ends the handshake.
// A client (ClientOptions) verifies the server's chain against its CA
// (--tls-ca-file, else the system roots), its name against ServerName or the
// URL's host, and with WantRole the role in the server's certificate.
//
// Reloading. Reloader keeps the certificate and key in memory and, at most
// once per CheckInterval, compares the two files' size and modification
// time; when they changed it loads the pair again (a pair that fails to load
// keeps the old one and is reported through OnError). New handshakes then
// present the new certificate; open connections keep theirs.
//
// Only TLS 1.2 and 1.3. Servers offer h2 and http/1.1 in ALPN; clients
// offer http/1.1 only, but for the router's transport to gateways
// (ClientOptions.HTTP2), which speaks HTTP/2 over TLS.
package tlsconf
