package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// pprofFlagUsage documents --pprof on every service command.
const pprofFlagUsage = "serve net/http/pprof on this address (e.g. 127.0.0.1:6060; off when empty)"

// startPprof serves the runtime profiles under /debug/pprof/ on addr, on a
// listener of its own so that they never share the service's port, until
// ctx ends: over TLS with cfg (see secureFlags.pprofTLS), plaintext when
// cfg is nil. An empty addr does nothing.
func startPprof(ctx context.Context, addr string, errw io.Writer, cfg *tls.Config) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return usagef("--pprof %q: %v", addr, err)
	}
	if err := pprofReach(ln.Addr(), cfg); err != nil {
		_ = ln.Close()
		return usagef("--pprof %q: %v", addr, err)
	}
	scheme := "http"
	if cfg != nil {
		ln, scheme = tls.NewListener(ln, cfg), "https"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fmt.Fprintf(errw, "pprof server: %v\n", err)
		}
	}()
	go func() {
		<-ctx.Done()
		_ = hs.Close()
	}()
	fmt.Fprintf(errw, "pprof on %s://%s/debug/pprof/\n", scheme, ln.Addr())
	return nil
}

// pprofReach refuses a profile listener other machines can reach unless it
// requires client certificates: profiles show the process's arguments and
// memory, and a CPU profile or trace costs the service while it runs.
func pprofReach(a net.Addr, cfg *tls.Config) error {
	if tcp, ok := a.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return nil
	}
	if cfg != nil && cfg.ClientAuth == tls.RequireAndVerifyClientCert {
		return nil
	}
	return fmt.Errorf("listening on %s serves profiles to anyone who reaches it; bind it to loopback (127.0.0.1:6060) or give --client-ca-file (operators' certificates)", a)
}
