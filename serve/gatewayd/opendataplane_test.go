package gatewayd

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
)

// TestSecurityOpenDataPlaneNamesNoRouterFromAHeader: with an open data
// plane, a request that proves nothing is counted under the fixed name
// Unauthenticated, whatever its X-Stargate-Router says, so a client cannot
// skew the per-router counts; a router's signed request is still counted
// under its own name.
func TestSecurityOpenDataPlaneNamesNoRouterFromAHeader(t *testing.T) {
	routerKey := auth.Key{ID: "r-1", Role: auth.RoleRouter, Secret: []byte("router-secret-0123456789")}
	ring, err := auth.NewKeyring(routerKey)
	if err != nil {
		t.Fatal(err)
	}
	g, url := startGateway(t, poisonEngine(t), func(c *Config) { c.Key, c.Keys, c.OpenDataPlane = auth.Key{}, ring, true })
	const body = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	do := func(req *http.Request) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, want 200 (the data plane is open)", resp.StatusCode)
		}
	}
	for i := range 5 {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set(wire.HeaderRouter, fmt.Sprintf("router-%d", i))
		do(req)
	}
	signed, _ := auth.NewSigner(routerKey, "router-real").NewRequest("gateway/gw", http.MethodPost, url+"/v1/chat/completions", []byte(body))
	signed.Header.Set(wire.HeaderRouter, "router-0")
	do(signed)
	g.mu.Lock()
	var names []string
	for name := range g.routerIx {
		names = append(names, name)
	}
	g.mu.Unlock()
	slices.Sort(names)
	if want := []string{"router-real", Unauthenticated}; !slices.Equal(names, want) {
		t.Fatalf("the gateway counts requests under %q, want %q", names, want)
	}
}
