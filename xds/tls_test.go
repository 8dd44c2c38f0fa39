package xds

import (
	"context"
	"crypto/tls"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stargate-llm/stargate/serve/tlsconf"
	"github.com/stargate-llm/stargate/serve/tlsconf/tlstest"
)

// askListeners opens an ADS stream over creds and asks for the listeners:
// the first answer, or the error.
func askListeners(t *testing.T, addr string, creds credentials.TransportCredentials) (*discoveryv3.DiscoveryResponse, error) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		return nil, err
	}
	if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType}); err != nil {
		return nil, err
	}
	return st.Recv()
}

// TestServeTLS: with Options.TLS, ADS is served over (mutual) TLS only: a
// plaintext client, and a TLS client without a certificate of an allowed
// role, get nothing; Envoy with a router certificate gets the listeners.
func TestServeTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "fleet")
	server := ca.Issue(t, "router", "spiffe://stargate/router/r1")
	envoy := ca.Issue(t, "envoy", "spiffe://stargate/router/envoy")
	gw := ca.Issue(t, "gateway", "spiffe://stargate/gateway/gw-a")
	cfg, _, err := tlsconf.ServerOptions{CertFile: server.CertFile, KeyFile: server.KeyFile, ClientCAFile: ca.File,
		RequireClient: true, AllowedRoles: []tlsconf.Role{tlsconf.RoleRouter, tlsconf.RoleOperator}}.Server()
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(Options{Window: -1, Logger: quiet, TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	s.Update(eps3(1, 2, 3))
	addr := startServer(t, s)
	client := func(leaf *tlstest.Leaf) credentials.TransportCredentials {
		c := &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: ca.Pool(), ServerName: "127.0.0.1"}
		if leaf != nil {
			pair, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			c.Certificates = []tls.Certificate{pair}
		}
		return credentials.NewTLS(c)
	}
	if _, err := askListeners(t, addr, insecure.NewCredentials()); err == nil {
		t.Error("a plaintext client was answered")
	}
	if _, err := askListeners(t, addr, client(nil)); err == nil {
		t.Error("a TLS client without a certificate was answered")
	}
	if _, err := askListeners(t, addr, client(&gw)); err == nil {
		t.Error("a client with a gateway's certificate was answered")
	}
	r, err := askListeners(t, addr, client(&envoy))
	if err != nil || len(r.GetResources()) == 0 {
		t.Fatalf("Envoy with a router certificate: %v, %d resources", err, len(r.GetResources()))
	}
}
