package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/serve/tlsconf/tlstest"
)

// startInProcess runs `stargate args...` in this process until the test
// ends and returns the URL it prints first.
func startInProcess(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, args, pw, tlogWriter{t})
		_ = pw.Close()
	}()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			t.Errorf("%v did not stop within 15 s", args)
		}
	})
	select {
	case line := <-lines:
		i := strings.Index(line, "://")
		j := strings.LastIndexAny(line[:max(i, 0)], " ")
		if i < 0 {
			t.Fatalf("%v printed %q, not a URL", args, line)
		}
		return strings.Fields(line[j+1:])[0]
	case code := <-done:
		t.Fatalf("%v exited with %d before serving", args, code)
	case <-time.After(30 * time.Second):
		t.Fatalf("%v did not start within 30 s", args)
	}
	return ""
}

// TestTLSRoundTrip runs an engine, a gateway and a router in this process
// on loopback, every listener on TLS and the router and gateway checking
// each other's certificates (mutual TLS): a client's streamed request goes
// through all three, the router reaches the gateway over HTTP/2 inside
// TLS, and the gateway refuses a caller without a router's certificate.
func TestTLSRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three services")
	}
	ca := tlstest.NewCA(t, "fleet")
	eng := ca.Issue(t, "engine", "spiffe://stargate/engine/e1")
	gw := ca.Issue(t, "gateway", "spiffe://stargate/gateway/gw-a")
	rt := ca.Issue(t, "router", "spiffe://stargate/router/r1")
	wrong := ca.Issue(t, "other-gateway", "spiffe://stargate/gateway/gw-b")
	keyFile := writeKeyFile(t)
	tlsArgs := func(l tlstest.Leaf, upstreams bool) []string {
		a := []string{"--tls-cert-file", l.CertFile, "--tls-private-key-file", l.KeyFile, "--client-ca-file", ca.File}
		if upstreams {
			a = append(a, "--tls-ca-file", ca.File)
		}
		return a
	}
	engURL := startInProcess(t, append([]string{"engine", "--listen", "127.0.0.1:0", "--gpus", "1", "--hmac-key-file", keyFile}, tlsArgs(eng, false)...)...)
	routerURL := startInProcess(t, append([]string{"router", "--listen", "127.0.0.1:0", "--hmac-key-file", keyFile}, tlsArgs(rt, true)...)...)
	gwURL := startInProcess(t, append([]string{"gateway", "--listen", "127.0.0.1:0", "--id", "gw-a", "--engine", engURL,
		"--router", routerURL, "--hmac-key-file", keyFile}, tlsArgs(gw, true)...)...)
	for _, u := range []string{engURL, routerURL, gwURL} {
		if !strings.HasPrefix(u, "https://") {
			t.Fatalf("a service serves on %q, want https", u)
		}
	}
	client := func(leaf *tlstest.Leaf) *http.Client {
		cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
		if leaf != nil {
			pair, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		tr := &http.Transport{TLSClientConfig: cfg, ForceAttemptHTTP2: true}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 20 * time.Second}
	}
	api := client(nil) // an API client: no certificate
	poll.Until(t, 20*time.Second, "the gateway registered over TLS", func() bool {
		resp, err := api.Get(routerURL + "/v1/stargate/backends")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var v struct {
			Backends []struct{ State string } `json:"backends"`
		}
		return json.NewDecoder(resp.Body).Decode(&v) == nil && len(v.Backends) == 1 && v.Backends[0].State == "ready"
	})
	body := `{"stream":true,"max_tokens":8,"messages":[{"role":"user","content":"hello over TLS"}]}`
	resp, err := api.Post(routerURL+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasSuffix(string(b), "data: [DONE]\n\n") {
		t.Fatalf("streamed request through router, gateway and engine: %d %q %v", resp.StatusCode, b, err)
	}
	if resp.Proto != "HTTP/2.0" {
		t.Errorf("the router answered an HTTP/2 client over %s: its TLS listener offers h2", resp.Proto)
	}
	// Over https the router never speaks h2c: HTTP/2 there is ALPN's to
	// negotiate (package tlsconf, TestALPN), not the h2c transport's.
	if got := metricSumClient(t, api, routerURL, "stargate_router_http2_connections", nil); got != 0 {
		t.Errorf("the router has %v h2c connections to an https gateway, want 0", got)
	}
	// The gateway takes routers (and operators) only.
	for _, c := range []struct {
		name   string
		client *http.Client
		ok     bool
	}{{"no certificate", client(nil), false}, {"a gateway's certificate", client(&wrong), false}, {"a router's certificate", client(&rt), true}} {
		resp, err := c.client.Get(gwURL + "/health")
		if err == nil {
			_ = resp.Body.Close()
		}
		if (err == nil) != c.ok {
			t.Errorf("the gateway with %s: err %v, want served %v", c.name, err, c.ok)
		}
	}
}

// tlogWriter logs a service's messages in the test's log.
type tlogWriter struct{ t *testing.T }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// TestTLSRouterRunsItsGateway: a router running its gateway in process
// (--gateway-engine) serves it to a second router over --gateway-listen on
// mutual TLS, with the router's certificate, and reaches an HTTPS engine.
func TestTLSRouterRunsItsGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three services")
	}
	ca := tlstest.NewCA(t, "fleet")
	eng := ca.Issue(t, "engine", "spiffe://stargate/engine/e1")
	r1 := ca.Issue(t, "r1", "spiffe://stargate/router/r1")
	r2 := ca.Issue(t, "r2", "spiffe://stargate/router/r2")
	keyFile := writeKeyFile(t)
	tlsArgs := func(l tlstest.Leaf) []string {
		return []string{"--tls-cert-file", l.CertFile, "--tls-private-key-file", l.KeyFile, "--client-ca-file", ca.File, "--tls-ca-file", ca.File}
	}
	engURL := startInProcess(t, "engine", "--listen", "127.0.0.1:0", "--gpus", "1", "--hmac-key-file", keyFile,
		"--tls-cert-file", eng.CertFile, "--tls-private-key-file", eng.KeyFile, "--client-ca-file", ca.File)
	other := startInProcess(t, append([]string{"router", "--listen", "127.0.0.1:0", "--hmac-key-file", keyFile}, tlsArgs(r2)...)...)
	gwAddr := freeAddr(t)
	box := startInProcess(t, append([]string{"router", "--listen", "127.0.0.1:0", "--hmac-key-file", keyFile, "--gateway-engine", engURL,
		"--gateway-id", "box", "--gateway-listen", gwAddr, "--gateway-router", other}, tlsArgs(r1)...)...)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}
	t.Cleanup(tr.CloseIdleConnections)
	api := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	for _, u := range []string{box, other} {
		poll.Until(t, 20*time.Second, "the gateway registered at "+u, func() bool {
			resp, err := api.Get(u + "/v1/stargate/backends")
			if err != nil {
				return false
			}
			defer resp.Body.Close()
			var v struct {
				Backends []struct{ URL, State string } `json:"backends"`
			}
			return json.NewDecoder(resp.Body).Decode(&v) == nil && len(v.Backends) == 1 && v.Backends[0].State == "ready" &&
				v.Backends[0].URL == "https://"+gwAddr
		})
		body := `{"max_tokens":4,"messages":[{"role":"user","content":"hi"}]}`
		resp, err := api.Post(u+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("via %s: status %d, want 200", u, resp.StatusCode)
		}
	}
}
