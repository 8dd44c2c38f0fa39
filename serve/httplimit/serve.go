package httplimit

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/stargate-llm/stargate/internal/rawio"
)

// Options are one listener's limits, TLS and name (for the start-up log).
type Options struct {
	Limits Limits
	// TLS, if set, serves HTTPS; nil serves plain HTTP, logged as such.
	TLS    *tls.Config
	Name   string // what the listener is, such as "router"
	Logger *slog.Logger
	// InMemory: the listener never leaves the process (package memnet),
	// so plain HTTP is not worth a warning.
	InMemory bool
	// ShutdownGrace is how long requests in flight get once ctx ends
	// (default 5 s).
	ShutdownGrace time.Duration
}

// Wrap returns the listener chain over ln: at most MaxConns connections,
// raw socket I/O, then TLS if configured.
func (o Options) Wrap(ln net.Listener) net.Listener {
	ln = LimitListener(rawio.Listener{Listener: ln}, o.Limits.MaxConns)
	if o.TLS != nil {
		ln = tls.NewListener(ln, o.TLS)
	}
	return ln
}

// Server returns the http.Server for h under the limits.
func (o Options) Server(h http.Handler) *http.Server {
	l := o.Limits
	return &http.Server{Handler: Handler(h, l), ReadHeaderTimeout: l.ReadHeaderTimeout, IdleTimeout: l.IdleTimeout,
		// WriteTimeout gives each request a fresh write deadline, which
		// Handler renews before each write: per write, not per response.
		WriteTimeout: l.WriteTimeout, MaxHeaderBytes: l.MaxHeaderBytes}
}

// Serve serves h on ln until ctx ends, then shuts down with a grace period
// for the requests in flight. It logs at start whether the listener is
// plain HTTP (WARN) or HTTPS.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, o Options) error {
	if err := o.Limits.Validate(); err != nil {
		_ = ln.Close()
		return err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.TLS == nil && o.InMemory:
		log.Debug("serving plain HTTP in memory", "listener", o.Name)
	case o.TLS == nil:
		log.Warn("serving plain HTTP: requests, keys and signatures cross the network unencrypted; give --tls-cert-file and --tls-private-key-file unless this is loopback or a test",
			"listener", o.Name, "addr", ln.Addr().String())
	default:
		log.Info("serving HTTPS", "listener", o.Name, "addr", ln.Addr().String(), "client_certs", clientAuth(o.TLS.ClientAuth))
	}
	hs := o.Server(h)
	// Failed handshakes (scanners, refused client certificates) and
	// malformed requests: --verbose shows them.
	hs.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelDebug)
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(o.Wrap(ln)) }()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	grace := o.ShutdownGrace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	shutdown, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = hs.Shutdown(shutdown)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving %s on %s: %w", o.Name, ln.Addr(), err)
	}
	return nil
}

func clientAuth(a tls.ClientAuthType) string {
	switch a {
	case tls.RequireAndVerifyClientCert:
		return "required"
	case tls.VerifyClientCertIfGiven:
		return "verified if sent"
	default:
		return "none"
	}
}
