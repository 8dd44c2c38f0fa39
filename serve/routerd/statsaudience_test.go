package routerd

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stargate-llm/stargate/serve/auth"
	"github.com/stargate-llm/stargate/serve/wire"
)

// TestSecurityStatsBoundToReplica: a gateway's stats message is signed for
// the one router replica it is sent to. Accepted there, the captured
// message is refused by another replica of the same service, and a message
// signed for the whole service is refused by every replica; each refusal
// names the replica (X-Stargate-Router), so a gateway can sign for it.
func TestSecurityStatsBoundToReplica(t *testing.T) {
	gw := auth.Key{ID: "gw-2026", Role: auth.RoleGateway, Secret: []byte("gateway-secret-0123456789")}
	ring, err := auth.NewKeyring(gw)
	if err != nil {
		t.Fatal(err)
	}
	start := func(id string) string {
		url, _ := startRouterWith(t, func(c *Config) { c.ID, c.Keys = id, ring }, nil)
		return url
	}
	url1, url2 := start("router-1"), start("router-2")
	body, err := json.Marshal(wire.Stats{Backend: "gw-a", URL: "http://127.0.0.1:1", Capacity: 4, Seq: 1})
	if err != nil {
		t.Fatal(err)
	}
	signer := auth.NewSigner(gw, "gw-a")
	send := func(req *http.Request, url string) (int, string) {
		t.Helper()
		again := req.Clone(req.Context())
		again.URL.Host, again.Host = strings.TrimPrefix(url, "http://"), ""
		again.Body = io.NopCloser(strings.NewReader(string(body)))
		resp, err := http.DefaultClient.Do(again)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get(wire.HeaderRouter)
	}
	toOne, err := signer.NewRequest("router/router-1", http.MethodPost, url1+wire.PathStats, body)
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := send(toOne, url1); code != http.StatusOK {
		t.Fatalf("stats signed for router-1 at router-1: %d", code)
	}
	if code, name := send(toOne, url2); code != http.StatusUnauthorized || name != "router-2" {
		t.Fatalf("the same stats replayed at router-2: %d naming %q, want 401 naming router-2", code, name)
	}
	service, err := signer.NewRequest("router", http.MethodPost, url2+wire.PathStats, body)
	if err != nil {
		t.Fatal(err)
	}
	if code, name := send(service, url2); code != http.StatusUnauthorized || name != "router-2" {
		t.Fatalf("stats signed for the whole service: %d naming %q, want 401 naming router-2", code, name)
	}
}
