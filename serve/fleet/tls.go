package fleet

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"time"
)

// TLS serves a fleet over TLS: every listener (engines, gateways, routers)
// with Server, and every service reaching another (router to gateway,
// gateway to router and engine) verifying it with Client.
type TLS struct {
	// Server is each listener's configuration (package tlsconf builds one
	// with reloading and client-certificate checks).
	Server *tls.Config
	// Client verifies the services' certificates (its RootCAs) and, for
	// mutual TLS, presents one (Certificates or GetClientCertificate).
	Client *tls.Config
}

// scheme is the fleet's URL scheme.
func (f *Fleet) scheme() string {
	if f.tls != nil {
		return "https"
	}
	return "http"
}

// listener wraps ln in TLS when the fleet has it.
func (f *Fleet) listener(ln net.Listener) net.Listener {
	if f.tls != nil {
		return tls.NewListener(ln, f.tls.Server)
	}
	return ln
}

// clientTransport is what a gateway reaches routers and its engine over
// (under its simulated network paths): nil, the default, without TLS.
func (f *Fleet) clientTransport() http.RoundTripper {
	if f.tls == nil {
		return nil
	}
	tr := &http.Transport{TLSClientConfig: f.tls.Client.Clone(), MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second}
	f.transports = append(f.transports, tr)
	return tr
}

// dialTLS is a router's verified TLS dialer (nil without TLS): the server
// name is the address's host.
func (f *Fleet) dialTLS() func(ctx context.Context, network, addr string) (net.Conn, error) {
	if f.tls == nil {
		return nil
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: f.tls.Client}
	return d.DialContext
}

// hostOf is a URL's host:port.
func hostOf(u string) string {
	return strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://")
}
