package main

import (
	"context"
	"crypto/tls"
	"io"
	"strings"
	"testing"
)

// TestSecurityPprofNotOpenToOthers: --pprof on an address other machines
// reach served every profile (the command line, heap, a 30 s CPU profile
// or trace on demand) to anyone, with or without TLS, unless client
// certificates were required. It must be refused at start then, and
// served on loopback or behind required client certificates.
func TestSecurityPprofNotOpenToOthers(t *testing.T) {
	required := &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert}
	tests := []struct {
		name string
		addr string
		cfg  *tls.Config
		ok   bool
	}{
		{"loopback, plaintext", "127.0.0.1:0", nil, true},
		{"loopback IPv6, plaintext", "[::1]:0", nil, true},
		{"every address, plaintext", ":0", nil, false},
		{"every IPv4 address, plaintext", "0.0.0.0:0", nil, false},
		{"every address, TLS without client certificates", ":0", &tls.Config{}, false},
		{"every address, client certificates required", ":0", required, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := startPprof(ctx, tt.addr, io.Discard, tt.cfg)
			if strings.HasPrefix(tt.addr, "[::1]") && err != nil && strings.Contains(err.Error(), "assign requested address") {
				t.Skip("no IPv6 loopback here")
			}
			if (err == nil) != tt.ok {
				t.Fatalf("startPprof(%q) = %v, want ok %v", tt.addr, err, tt.ok)
			}
			if err != nil && !strings.Contains(err.Error(), "--client-ca-file") {
				t.Errorf("error %q does not say what to do", err)
			}
		})
	}
}
