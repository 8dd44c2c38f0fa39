package tlsconf_test

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/stargate-llm/stargate/serve/tlsconf"
	"github.com/stargate-llm/stargate/serve/tlsconf/tlstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// serveTLS serves on loopback with cfg a handler that answers the peer's
// identity ("none" without one).
func serveTLS(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, ok := tlsconf.PeerIdentity(r)
		if !ok {
			_, _ = io.WriteString(w, "none")
			return
		}
		_, _ = io.WriteString(w, id.String())
	})}
	go func() { _ = hs.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = hs.Close() })
	return ln.Addr().String()
}

// get asks addr over a client with opts; the body, or the error.
func get(t *testing.T, addr string, opts tlsconf.ClientOptions) (string, error) {
	t.Helper()
	dial, err := opts.Dialer(nil)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialTLSContext: dial}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func reloader(t *testing.T, l tlstest.Leaf) *tlsconf.Reloader {
	t.Helper()
	r, err := tlsconf.NewReloader(l.CertFile, l.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "fleet")
	other := tlstest.NewCA(t, "other")
	gw := ca.Issue(t, "gateway", "spiffe://stargate/gateway/gw-a")
	scfg, _, err := tlsconf.ServerOptions{CertFile: gw.CertFile, KeyFile: gw.KeyFile, ClientCAFile: ca.File,
		RequireClient: true, AllowedRoles: []tlsconf.Role{tlsconf.RoleRouter}}.Server()
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, scfg)
	for _, tc := range []struct {
		name string
		cert *tlstest.Leaf
		want string // the identity the gateway saw; "" refused
	}{
		{"router", new(ca.Issue(t, "router", "spiffe://stargate/router/r1")), "spiffe://stargate/router/r1"},
		{"no client certificate", nil, ""},
		{"wrong role", new(ca.Issue(t, "gw-b", "spiffe://stargate/gateway/gw-b")), ""},
		{"no identity", new(ca.Issue(t, "plain", "")), ""},
		{"two identities' worth of trust domain elsewhere", new(ca.Issue(t, "elsewhere", "spiffe://example.org/router/r1")), ""},
		{"another CA", new(other.Issue(t, "router-other", "spiffe://stargate/router/r1")), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tlsconf.ClientOptions{CAFile: ca.File}
			if tc.cert != nil {
				opts.Cert = reloader(t, *tc.cert)
			}
			got, err := get(t, addr, opts)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("the gateway served %q; want the handshake refused", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestOptionalClientCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "fleet")
	rt := ca.Issue(t, "router", "spiffe://stargate/router/r1")
	scfg, _, err := tlsconf.ServerOptions{CertFile: rt.CertFile, KeyFile: rt.KeyFile, ClientCAFile: ca.File}.Server()
	if err != nil {
		t.Fatal(err)
	}
	addr := serveTLS(t, scfg)
	if got, err := get(t, addr, tlsconf.ClientOptions{CAFile: ca.File}); err != nil || got != "none" {
		t.Errorf("an API client without a certificate: %q, %v; want served with no identity", got, err)
	}
	gw := ca.Issue(t, "gateway", "spiffe://stargate/gateway/gw-a")
	if got, err := get(t, addr, tlsconf.ClientOptions{CAFile: ca.File, Cert: reloader(t, gw)}); err != nil || got != "spiffe://stargate/gateway/gw-a" {
		t.Errorf("a gateway: %q, %v; want its identity", got, err)
	}
}

func TestClientChecksTheServer(t *testing.T) {
	ca := tlstest.NewCA(t, "fleet")
	other := tlstest.NewCA(t, "other")
	gwRole := func(string) []tlsconf.Role { return []tlsconf.Role{tlsconf.RoleGateway} }
	serve := func(l tlstest.Leaf) string {
		cfg, _, err := tlsconf.ServerOptions{CertFile: l.CertFile, KeyFile: l.KeyFile}.Server()
		if err != nil {
			t.Fatal(err)
		}
		return serveTLS(t, cfg)
	}
	good := serve(ca.Issue(t, "gateway", "spiffe://stargate/gateway/gw-a"))
	engine := serve(ca.Issue(t, "engine", "spiffe://stargate/engine/e1"))
	foreign := serve(other.Issue(t, "gw-other", "spiffe://stargate/gateway/gw-a"))
	for _, tc := range []struct {
		name string
		addr string
		opts tlsconf.ClientOptions
		ok   bool
	}{
		{"gateway", good, tlsconf.ClientOptions{CAFile: ca.File, RoleFor: gwRole}, true},
		{"engine where a gateway is wanted", engine, tlsconf.ClientOptions{CAFile: ca.File, RoleFor: gwRole}, false},
		{"engine without a role check", engine, tlsconf.ClientOptions{CAFile: ca.File}, true},
		{"unknown CA", foreign, tlsconf.ClientOptions{CAFile: ca.File}, false},
		{"system roots", good, tlsconf.ClientOptions{}, false},
		{"server name it does not carry", good, tlsconf.ClientOptions{CAFile: ca.File, ServerName: "gw.example"}, false},
		{"server name it carries", good, tlsconf.ClientOptions{CAFile: ca.File, ServerName: "localhost"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := get(t, tc.addr, tc.opts)
			if (err == nil) != tc.ok {
				t.Fatalf("err %v; want ok %v", err, tc.ok)
			}
		})
	}
}

func TestCertificateReloadedOnChange(t *testing.T) {
	ca := tlstest.NewCA(t, "fleet")
	first := ca.Issue(t, "gateway", "spiffe://stargate/gateway/gw-a")
	cfg, r, err := tlsconf.ServerOptions{CertFile: first.CertFile, KeyFile: first.KeyFile}.Server()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	r.SetClock(func() time.Time { return now })
	addr := serveTLS(t, cfg)
	serial := func() string {
		t.Helper()
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != first.Cert.SerialNumber.String() {
		t.Fatalf("serving serial %s, want %s", got, first.Cert.SerialNumber)
	}
	second := ca.IssueTo(t, first.CertFile, first.KeyFile, "gateway", "spiffe://stargate/gateway/gw-a")
	if got := serial(); got != first.Cert.SerialNumber.String() {
		t.Errorf("before the check interval: serial %s, want the old %s", got, first.Cert.SerialNumber)
	}
	now = now.Add(tlsconf.DefaultCheckInterval)
	if got := serial(); got != second.SerialNumber.String() {
		t.Errorf("after rotation: serial %s, want the new %s", got, second.SerialNumber)
	}
	// A broken pair keeps the old one and is reported.
	var reported error
	r.OnError = func(err error) { reported = err }
	if err := writeFile(first.KeyFile, "not a key"); err != nil {
		t.Fatal(err)
	}
	now = now.Add(tlsconf.DefaultCheckInterval)
	if got := serial(); got != second.SerialNumber.String() || reported == nil {
		t.Errorf("after a broken rotation: serial %s (want %s), reported %v", got, second.SerialNumber, reported)
	}
}

func TestParseIdentity(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want tlsconf.Identity
		ok   bool
	}{
		{"spiffe://stargate/router/r1", tlsconf.Identity{Role: tlsconf.RoleRouter, Name: "r1"}, true},
		{"spiffe://stargate/operator/alice", tlsconf.Identity{Role: tlsconf.RoleOperator, Name: "alice"}, true},
		{"spiffe://stargate/admin/alice", tlsconf.Identity{}, false},
		{"spiffe://stargate/router", tlsconf.Identity{}, false},
		{"spiffe://stargate/router/a/b", tlsconf.Identity{}, false},
		{"spiffe://other/router/r1", tlsconf.Identity{}, false},
		{"https://stargate/router/r1", tlsconf.Identity{}, false},
	} {
		u, err := url.Parse(tc.in)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tlsconf.ParseIdentity(u)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseIdentity(%q) = %v, %v; want %v ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tc.in)
		}
	}
}

func TestServerOptionsRefuseHalfConfigurations(t *testing.T) {
	ca := tlstest.NewCA(t, "fleet")
	l := ca.Issue(t, "gateway", "")
	for _, tc := range []struct {
		name string
		o    tlsconf.ServerOptions
		want string
	}{
		{"client CA without TLS", tlsconf.ServerOptions{ClientCAFile: ca.File}, "mutual TLS is TLS"},
		{"certificate without key", tlsconf.ServerOptions{CertFile: l.CertFile}, "give both"},
		{"required without client CA", tlsconf.ServerOptions{CertFile: l.CertFile, KeyFile: l.KeyFile, RequireClient: true}, "needs --client-ca-file"},
		{"missing file", tlsconf.ServerOptions{CertFile: l.CertFile + ".gone", KeyFile: l.KeyFile}, "no such file"},
		{"key is not a key", tlsconf.ServerOptions{CertFile: l.CertFile, KeyFile: ca.File}, "private key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := tc.o.Server()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v; want one saying %q", err, tc.want)
			}
		})
	}
	if cfg, _, err := (tlsconf.ServerOptions{}).Server(); cfg != nil || err != nil {
		t.Errorf("no options: %v, %v; want plain HTTP", cfg, err)
	}
}

// TestALPN: servers offer h2 and http/1.1; a client offers h2 only with
// ClientOptions.HTTP2 (the router's transport to gateways), so a plain
// net/http Transport given the dialer keeps HTTP/1.1 and never receives
// an HTTP/2 connection it cannot read.
func TestALPN(t *testing.T) {
	ca := tlstest.NewCA(t, "fleet")
	gw := ca.Issue(t, "gateway", "spiffe://stargate/gateway/gw-a")
	scfg, _, err := tlsconf.ServerOptions{CertFile: gw.CertFile, KeyFile: gw.KeyFile}.Server()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Proto) })}
	go func() { _ = hs.Serve(tls.NewListener(ln, scfg)) }()
	t.Cleanup(func() { _ = hs.Close() })
	for _, tc := range []struct {
		http2 bool
		want  string
	}{{false, "HTTP/1.1"}, {true, "HTTP/2.0"}} {
		dial, err := tlsconf.ClientOptions{CAFile: ca.File, HTTP2: tc.http2}.Dialer(nil)
		if err != nil {
			t.Fatal(err)
		}
		tr := &http.Transport{DialTLSContext: dial, ForceAttemptHTTP2: tc.http2}
		resp, err := tr.RoundTrip(mustGet(t, "https://"+ln.Addr().String()+"/"))
		if err != nil {
			t.Fatalf("HTTP2 %v: %v", tc.http2, err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		tr.CloseIdleConnections()
		if err != nil || string(b) != tc.want || resp.Proto != tc.want {
			t.Errorf("HTTP2 %v: served %q, answered over %s (%v); want %s both", tc.http2, b, resp.Proto, err, tc.want)
		}
	}
}

func mustGet(t *testing.T, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}
