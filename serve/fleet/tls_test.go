package fleet

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stargate-llm/stargate/config"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/tlsconf"
	"github.com/stargate-llm/stargate/serve/tlsconf/tlstest"
)

// TestFleetOverTLS: with Options.TLS every listener of the fleet serves
// HTTPS only (plaintext gets no answer from any), and a request goes
// through router, gateway and engine, each hop verified.
func TestFleetOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "fleet")
	leaf := ca.Issue(t, "fleet", "spiffe://stargate/router/fleet")
	server, _, err := tlsconf.ServerOptions{CertFile: leaf.CertFile, KeyFile: leaf.KeyFile}.Server()
	if err != nil {
		t.Fatal(err)
	}
	client := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	reg := policy.NewRegistry()
	fl, _ := config.Preset("small")
	cfg, err := fl.SimConfig(config.Run{Policy: "round-robin", RPS: 1, Seed: 1, Warmup: time.Second, Measure: time.Second}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f, err := Start(ctx, cfg, reg, Options{Seed: 1, TLS: &TLS{Server: server, Client: client}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Stop)
	urls := append(append(append([]string{}, f.RouterURLs...), f.GatewayURLs...), f.EngineURLs...)
	plain := &http.Client{Timeout: 10 * time.Second}
	defer plain.CloseIdleConnections()
	for _, u := range urls {
		if !strings.HasPrefix(u, "https://") {
			t.Fatalf("a fleet listener at %q, want https", u)
		}
		resp, err := plain.Get("http://" + hostOf(u) + "/health")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Errorf("%s answered plaintext /health with 200", u)
			}
		}
	}
	tr := &http.Transport{TLSClientConfig: client}
	defer tr.CloseIdleConnections()
	api := &http.Client{Transport: tr, Timeout: 20 * time.Second}
	resp, err := api.Post(f.RouterURLs[0]+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"max_tokens":4,"messages":[{"role":"user","content":"hello over TLS"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `"finish_reason":"length"`) {
		t.Fatalf("a request through the fleet over TLS: %d %s", resp.StatusCode, b)
	}
}
