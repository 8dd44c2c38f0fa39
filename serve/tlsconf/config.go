package tlsconf

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"time"
)

// ServerOptions describe a listener's TLS (the --tls-* and --client-ca-file
// flags). The zero value is plain HTTP.
type ServerOptions struct {
	CertFile, KeyFile string // --tls-cert-file, --tls-private-key-file
	// ClientCAFile (--client-ca-file) verifies client certificates.
	ClientCAFile string
	// RequireClient refuses a handshake without a verified client
	// certificate (a gateway); otherwise one is asked for and verified if
	// sent (a router, which serves API clients too).
	RequireClient bool
	// AllowedRoles, if set, are the roles a verified client certificate
	// may name; another role, or none, ends the handshake.
	AllowedRoles []Role
	// OnReloadError hears of a rotated pair that failed to load.
	OnReloadError func(error)
}

// Enabled says whether the options ask for TLS.
func (o ServerOptions) Enabled() bool { return o.CertFile != "" || o.KeyFile != "" }

// Server builds the server configuration, or nil for plain HTTP. A client
// CA without a certificate of its own is an error: mutual TLS needs TLS.
func (o ServerOptions) Server() (*tls.Config, *Reloader, error) {
	if !o.Enabled() {
		if o.ClientCAFile != "" {
			return nil, nil, errors.New("tlsconf: --client-ca-file needs --tls-cert-file and --tls-private-key-file: mutual TLS is TLS")
		}
		return nil, nil, nil
	}
	r, err := NewReloader(o.CertFile, o.KeyFile)
	if err != nil {
		return nil, nil, err
	}
	r.OnError = o.OnReloadError
	// h2 for the routers' HTTP/2 to gateways and for clients that speak it;
	// net/http serves both on a *tls.Conn.
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate, NextProtos: []string{"h2", "http/1.1"}}
	if o.ClientCAFile != "" {
		pool, err := loadPool(o.ClientCAFile, "--client-ca-file")
		if err != nil {
			return nil, nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
		if o.RequireClient {
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		}
		if len(o.AllowedRoles) > 0 {
			roles := slices.Clone(o.AllowedRoles)
			cfg.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return nil // no certificate: RequireClient decided already
				}
				return checkRole(cs.PeerCertificates[0], roles, "client")
			}
		}
	} else if o.RequireClient || len(o.AllowedRoles) > 0 {
		return nil, nil, errors.New("tlsconf: checking clients' certificates needs --client-ca-file")
	}
	return cfg, r, nil
}

// ClientOptions describe how a service reaches its upstreams over HTTPS
// (--tls-ca-file, --tls-server-name) and, for mutual TLS, the certificate it
// presents (its own --tls-cert-file and --tls-private-key-file).
type ClientOptions struct {
	CAFile     string // --tls-ca-file; empty: the system's roots
	ServerName string // --tls-server-name; empty: the address's host
	// Cert, if set, is presented to servers that ask for one.
	Cert *Reloader
	// RoleFor, if set, gives the roles the certificate of the server at
	// addr (host:port) may name; none skips the check (an engine such as
	// vLLM has a certificate without an identity).
	RoleFor func(addr string) []Role
	// HTTP2 offers h2 in ALPN before http/1.1: only for a transport that
	// speaks HTTP/2 on what the dialer returns (the router's to gateways;
	// a plain net/http Transport with DialTLSContext would not).
	HTTP2 bool
}

// handshakeTimeout bounds a client's TLS handshake.
const handshakeTimeout = 10 * time.Second

// DialFunc opens a connection, as net.Dialer.DialContext.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Client builds the configuration shared by every upstream; Dialer adds
// each address's name and role check to it.
func (o ClientOptions) Client() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName, NextProtos: []string{"http/1.1"}}
	if o.HTTP2 {
		cfg.NextProtos = []string{"h2", "http/1.1"}
	}
	if o.CAFile != "" {
		pool, err := loadPool(o.CAFile, "--tls-ca-file")
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if o.Cert != nil {
		cfg.GetClientCertificate = o.Cert.GetClientCertificate
	}
	return cfg, nil
}

// Dialer returns a dial function that opens a connection with dial (nil: TCP)
// and completes a verified TLS handshake on it: the use of
// http.Transport.DialTLSContext and of the router's links.
func (o ClientOptions) Dialer(dial DialFunc) (DialFunc, error) {
	base, err := o.Client()
	if err != nil {
		return nil, err
	}
	if dial == nil {
		d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 15 * time.Second}
		dial = d.DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		cfg := base.Clone()
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			cfg.ServerName = host
		}
		if o.RoleFor != nil {
			if roles := o.RoleFor(addr); len(roles) > 0 {
				cfg.VerifyConnection = func(cs tls.ConnectionState) error {
					if len(cs.PeerCertificates) == 0 {
						return errors.New("tlsconf: the server sent no certificate")
					}
					return checkRole(cs.PeerCertificates[0], roles, "server at "+addr)
				}
			}
		}
		nc, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
		defer cancel()
		if err := tc.HandshakeContext(hctx); err != nil {
			_ = nc.Close()
			return nil, fmt.Errorf("tlsconf: TLS handshake with %s: %w", addr, err)
		}
		return tc, nil
	}, nil
}

// checkRole says whether cert's identity names one of roles.
func checkRole(cert *x509.Certificate, roles []Role, who string) error {
	id, ok := IdentityOf(cert)
	if !ok {
		return fmt.Errorf("tlsconf: the %s's certificate (%s) names no identity spiffe://%s/ROLE/NAME", who, cert.Subject, TrustDomain)
	}
	if !slices.Contains(roles, id.Role) {
		return fmt.Errorf("tlsconf: the %s's certificate is %s; want role %v", who, id, roles)
	}
	return nil
}

func loadPool(path, flag string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tlsconf: %s: %w", flag, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tlsconf: %s %s holds no PEM certificate", flag, path)
	}
	return pool, nil
}
