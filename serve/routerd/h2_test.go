package routerd

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestGatewayTransport: hosts that speak h2c get HTTP/2 on shared
// connections, HTTP/1.1 servers get HTTP/1.1, and an unreachable host
// fails as a refused dial, as over HTTP/1.1.
func TestGatewayTransport(t *testing.T) {
	proto := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Proto) })
	h2srv := httptest.NewUnstartedServer(proto)
	var both http.Protocols
	both.SetHTTP1(true)
	both.SetUnencryptedHTTP2(true)
	h2srv.Config.Protocols = &both
	h2srv.Start()
	defer h2srv.Close()
	h1srv := httptest.NewServer(proto)
	defer h1srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	_ = ln.Close()

	tr := newGatewayTransport(&http.Transport{}, nil)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	get := func(url string) (string, error) {
		resp, err := client.Get(url + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	for range 3 {
		if got, err := get(h2srv.URL); err != nil || got != "HTTP/2.0" {
			t.Fatalf("h2c host: %q, %v; want HTTP/2.0", got, err)
		}
		if got, err := get(h1srv.URL); err != nil || got != "HTTP/1.1" {
			t.Fatalf("HTTP/1.1 host: %q, %v; want HTTP/1.1", got, err)
		}
	}
	if n := tr.Conns(); n != 1 {
		t.Errorf("%d HTTP/2 connections open; want the one to the h2c host", n)
	}
	_, err = get(gone)
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Errorf("unreachable host: %v; want a dial error (a refused connection)", err)
	}
	tr.mu.Lock()
	h, ok := tr.hosts[ln.Addr().String()]
	tr.mu.Unlock()
	if !ok {
		t.Fatal("the unreachable host was never looked up")
	}
	h.mu.Lock()
	known := h.known
	h.mu.Unlock()
	if known {
		t.Error("an unreachable host was judged; it must be asked again when it answers")
	}
}

// TestBackendTransportTLS: over TLS the router's default transport speaks
// HTTP/2 when the handshake negotiates h2 and HTTP/1.1 when it does not,
// its TLS dialer deciding what is offered.
func TestBackendTransportTLS(t *testing.T) {
	proto := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Proto) })
	srv := httptest.NewUnstartedServer(proto)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	for _, tc := range []struct {
		alpn []string
		want string
	}{{[]string{"h2", "http/1.1"}, "HTTP/2.0"}, {[]string{"http/1.1"}, "HTTP/1.1"}} {
		cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
		cfg.NextProtos = tc.alpn
		dialTLS := func(ctx context.Context, network, addr string) (net.Conn, error) {
			return (&tls.Dialer{Config: cfg}).DialContext(ctx, network, addr)
		}
		tr := newGatewayTransport(newBackendTransport(nil, dialTLS), nil)
		resp, err := (&http.Client{Transport: tr}).Get(srv.URL + "/")
		if err != nil {
			t.Fatalf("ALPN %v: %v", tc.alpn, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.CloseIdleConnections()
		if err != nil || string(b) != tc.want {
			t.Errorf("ALPN %v: %q, %v; want %s", tc.alpn, b, err, tc.want)
		}
	}
}

// TestH2ProbeOnce: one request asks a host at a time; the others take the
// last answer meanwhile; a fresh "no" and an unreachable host are not asked
// again at once; a stale "no" is.
func TestH2ProbeOnce(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	for _, tc := range []struct {
		name string
		h    *h2Host
		want bool
	}{
		{"never asked", &h2Host{}, true},
		{"asked by another request now", &h2Host{probing: true}, false},
		{"a fresh no", &h2Host{known: true, until: now.Add(time.Second)}, false},
		{"a stale no", &h2Host{known: true, until: now.Add(-time.Second)}, true},
		{"a yes", &h2Host{known: true, h2: true}, false},
		{"unreachable a moment ago", &h2Host{retryAt: now.Add(time.Second)}, false},
		{"forgotten", &h2Host{until: now.Add(time.Hour)}, true},
	} {
		if got := tc.h.startProbe(now); got != tc.want {
			t.Errorf("%s: ask %v, want %v", tc.name, got, tc.want)
		}
		if tc.want && !tc.h.probing {
			t.Errorf("%s: asked without marking it", tc.name)
		}
	}
}
