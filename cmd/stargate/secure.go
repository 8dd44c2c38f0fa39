package main

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"

	"github.com/spf13/pflag"

	"github.com/stargate-llm/stargate/serve/httplimit"
	"github.com/stargate-llm/stargate/serve/tlsconf"
)

// secureFlags are a service's TLS and listener-limit flags (docs/tls.md).
type secureFlags struct {
	certFile, keyFile, clientCA string
	caFile, serverName          string // upstreams; router and gateway only
	limits                      httplimit.Limits

	reloader *tlsconf.Reloader // set by server
}

// addSecureFlags registers them; upstreams adds --tls-ca-file and
// --tls-server-name (services that call others over HTTPS).
func addSecureFlags(f *pflag.FlagSet, s *secureFlags, upstreams bool) {
	s.limits = httplimit.DefaultLimits()
	f.StringVar(&s.certFile, "tls-cert-file", "", "serve HTTPS with this PEM certificate (chain); reloaded when the file changes")
	f.StringVar(&s.keyFile, "tls-private-key-file", "", "the PEM private key of --tls-cert-file")
	f.StringVar(&s.clientCA, "client-ca-file", "", "mutual TLS: verify client certificates with these PEM CAs and check the peers' roles (docs/tls.md)")
	if upstreams {
		f.StringVar(&s.caFile, "tls-ca-file", "", "verify HTTPS upstreams with these PEM CAs (default: the system's)")
		f.StringVar(&s.serverName, "tls-server-name", "", "name HTTPS upstreams' certificates must carry (default: the host of their URL)")
	}
	l := &s.limits
	f.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", l.ReadHeaderTimeout, "longest time to send a request header (and the TLS handshake)")
	f.DurationVar(&l.BodyReadTimeout, "body-read-timeout", l.BodyReadTimeout, "longest time to send a request body")
	f.DurationVar(&l.WriteTimeout, "write-timeout", l.WriteTimeout, "longest wait for one write to the client (renewed per write: streams are not cut)")
	f.DurationVar(&l.IdleTimeout, "idle-timeout", l.IdleTimeout, "close a kept-alive connection idle this long")
	f.IntVar(&l.MaxConns, "max-connections", l.MaxConns, "connections served at once; more wait in the accept queue")
	f.Int64Var(&l.LargeBody, "large-body-bytes", l.LargeBody, "a request body larger than this is large: it takes one of --max-large-bodies slots once this many bytes of it have arrived")
	f.IntVar(&l.MaxLargeBodies, "max-large-bodies", l.MaxLargeBodies, "requests with large bodies served at once; more get 503")
	f.Int64Var(&l.MaxBodyMemory, "max-body-memory", l.MaxBodyMemory, "bytes of memory for the large bodies served at once, each charged 4 times its size (parsing included); more get 503 at once (0: no bound)")
}

// tlsOn says whether the service serves HTTPS.
func (s *secureFlags) tlsOn() bool { return s.certFile != "" || s.keyFile != "" }

// mutual says whether peers' certificates and roles are checked.
func (s *secureFlags) mutual() bool { return s.clientCA != "" }

// scheme is the service's own URL scheme.
func (s *secureFlags) scheme() string {
	if s.tlsOn() {
		return "https"
	}
	return "http"
}

// server builds the listener's TLS configuration (nil: plain HTTP).
// require refuses clients without a verified certificate naming one of
// roles (with --client-ca-file).
func (s *secureFlags) server(log *slog.Logger, require bool, roles ...tlsconf.Role) (*tls.Config, error) {
	if err := s.limits.Validate(); err != nil {
		return nil, usageError{err}
	}
	o := tlsconf.ServerOptions{CertFile: s.certFile, KeyFile: s.keyFile, ClientCAFile: s.clientCA}
	if s.mutual() {
		o.RequireClient, o.AllowedRoles = require, roles
	}
	if log != nil {
		o.OnReloadError = func(err error) { log.Error("reloading the TLS certificate; serving the old one", "err", err) }
	}
	cfg, r, err := o.Server()
	if err != nil {
		return nil, usageError{err}
	}
	s.reloader = r
	return cfg, nil
}

// dialer returns the verified TLS dialer of the service's upstreams, or nil
// when no TLS flag is given (https upstreams then get net/http's defaults).
// With --client-ca-file the upstreams' roles are checked (roleFor) and the
// service's own certificate is presented. Call after server.
// With http2 the dialer offers h2 in ALPN (only for a transport that
// speaks it on what the dialer returns: the router's to gateways).
func (s *secureFlags) dialer(dial tlsconf.DialFunc, roleFor func(addr string) []tlsconf.Role, http2 bool) (tlsconf.DialFunc, error) {
	if !s.tlsOn() && s.caFile == "" && s.serverName == "" && !s.mutual() {
		return nil, nil
	}
	o := tlsconf.ClientOptions{CAFile: s.caFile, ServerName: s.serverName, Cert: s.reloader, HTTP2: http2}
	if s.mutual() {
		o.RoleFor = roleFor
	}
	d, err := o.Dialer(dial)
	if err != nil {
		return nil, usageError{err}
	}
	return d, nil
}

// options are the listener's limits and TLS for httplimit.Serve.
func (s *secureFlags) options(name string, cfg *tls.Config, log *slog.Logger) httplimit.Options {
	return httplimit.Options{Limits: s.limits, TLS: cfg, Name: name, Logger: log}
}

// hostsOf are the host:port of URLs (default ports filled in).
func hostsOf(urls []string) []string {
	var out []string
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil || u.Host == "" {
			continue
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443"}[u.Scheme]
			if port == "" {
				port = "80"
			}
		}
		out = append(out, net.JoinHostPort(u.Hostname(), port))
	}
	return out
}

// rolesFor checks the roles of the servers at hosts only.
func rolesFor(hosts []string, roles ...tlsconf.Role) func(string) []tlsconf.Role {
	return func(addr string) []tlsconf.Role {
		if slices.Contains(hosts, addr) {
			return roles
		}
		return nil
	}
}

// serveHandler serves h on ln under the limits and TLS of o until ctx ends,
// then shuts down with a grace period for the requests in flight.
func serveHandler(ctx context.Context, ln net.Listener, h http.Handler, o httplimit.Options) error {
	if err := httplimit.Serve(ctx, ln, h, o); err != nil {
		return failure{err}
	}
	return nil
}
