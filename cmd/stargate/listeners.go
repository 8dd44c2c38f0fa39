package main

import (
	"crypto/tls"
	"log/slog"

	"github.com/spf13/pflag"

	"github.com/stargate-llm/stargate/serve/fleet"
	"github.com/stargate-llm/stargate/serve/tlsconf"
)

// sideTLS is the TLS of a service's other listeners (--pprof, --xds-listen):
// its own certificate (reloaded as the main listener's), and with
// --client-ca-file a verified client certificate naming one of roles,
// required. nil without --tls-cert-file: those listeners then serve
// plaintext and say so.
func (s *secureFlags) sideTLS(log *slog.Logger, roles ...tlsconf.Role) (*tls.Config, error) {
	if !s.tlsOn() {
		return nil, nil
	}
	o := tlsconf.ServerOptions{CertFile: s.certFile, KeyFile: s.keyFile, ClientCAFile: s.clientCA}
	if s.mutual() {
		o.RequireClient, o.AllowedRoles = true, roles
	}
	if log != nil {
		o.OnReloadError = func(err error) { log.Error("reloading the TLS certificate; serving the old one", "err", err) }
	}
	cfg, _, err := o.Server()
	if err != nil {
		return nil, usageError{err}
	}
	return cfg, nil
}

// pprofTLS is the --pprof listener's TLS: operators only, with
// --client-ca-file (profiles show the process's memory and arguments).
func (s *secureFlags) pprofTLS(log *slog.Logger) (*tls.Config, error) {
	return s.sideTLS(log, tlsconf.RoleOperator)
}

// fleetTLSFlags are stargate fleet's TLS flags: one certificate for every
// service of the fleet, and the CA they verify one another with.
type fleetTLSFlags struct{ certFile, keyFile, caFile string }

func (t *fleetTLSFlags) add(f *pflag.FlagSet) {
	f.StringVar(&t.certFile, "tls-cert-file", "", "serve every listener of the fleet (and --pprof) over HTTPS with this PEM certificate, valid for 127.0.0.1")
	f.StringVar(&t.keyFile, "tls-private-key-file", "", "the PEM private key of --tls-cert-file")
	f.StringVar(&t.caFile, "tls-ca-file", "", "the PEM CAs the fleet's services verify one another with (default: the system's)")
}

// build returns the fleet's TLS, nil without --tls-cert-file.
func (t *fleetTLSFlags) build(log *slog.Logger) (*fleet.TLS, error) {
	o := tlsconf.ServerOptions{CertFile: t.certFile, KeyFile: t.keyFile}
	if !o.Enabled() {
		if t.caFile != "" {
			return nil, usagef("--tls-ca-file needs --tls-cert-file and --tls-private-key-file")
		}
		return nil, nil
	}
	if log != nil {
		o.OnReloadError = func(err error) { log.Error("reloading the TLS certificate; serving the old one", "err", err) }
	}
	server, r, err := o.Server()
	if err != nil {
		return nil, usageError{err}
	}
	client, err := tlsconf.ClientOptions{CAFile: t.caFile, Cert: r}.Client()
	if err != nil {
		return nil, usageError{err}
	}
	return &fleet.TLS{Server: server, Client: client}, nil
}
