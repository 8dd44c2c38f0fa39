package main

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/stargate-llm/stargate/internal/poll"
	"github.com/stargate-llm/stargate/serve/tlsconf/tlstest"
)

// TestTLSSideListeners: a router given TLS flags serves its --xds-listen
// and --pprof listeners over mutual TLS too: plaintext gets nothing on
// either, nor does a certificate of a role the listener does not take;
// Envoy (a router certificate) gets ADS, an operator gets the profiles.
func TestTLSSideListeners(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a router")
	}
	ca := tlstest.NewCA(t, "fleet")
	rt := ca.Issue(t, "router", "spiffe://stargate/router/r1")
	envoy := ca.Issue(t, "envoy", "spiffe://stargate/router/envoy")
	op := ca.Issue(t, "operator", "spiffe://stargate/operator/ops")
	gw := ca.Issue(t, "gateway", "spiffe://stargate/gateway/gw-a")
	xdsAddr, pprofAddr := freeAddr(t), freeAddr(t)
	startInProcess(t, "router", "--listen", "127.0.0.1:0", "--hmac-key-file", writeKeyFile(t), "--xds-listen", xdsAddr, "--pprof", pprofAddr,
		"--backend", "a=http://127.0.0.1:1", // an endpoint to export
		"--tls-cert-file", rt.CertFile, "--tls-private-key-file", rt.KeyFile, "--client-ca-file", ca.File, "--tls-ca-file", ca.File)
	tlsWith := func(leaf *tlstest.Leaf) *tls.Config {
		cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
		if leaf != nil {
			pair, err := tls.LoadX509KeyPair(leaf.CertFile, leaf.KeyFile)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		return cfg
	}
	profiles := func(scheme string, cfg *tls.Config) (int, error) {
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Get(scheme + "://" + pprofAddr + "/debug/pprof/")
		if err != nil {
			return 0, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	poll.Until(t, 20*time.Second, "the pprof listener", func() bool { code, _ := profiles("https", tlsWith(&op)); return code == http.StatusOK })
	if code, err := profiles("http", nil); err == nil && code == http.StatusOK {
		t.Error("pprof served profiles in plaintext")
	}
	for name, leaf := range map[string]*tlstest.Leaf{"no certificate": nil, "a router's certificate": &rt} {
		if code, err := profiles("https", tlsWith(leaf)); err == nil {
			t.Errorf("pprof with %s: status %d, want a refused handshake", name, code)
		}
	}
	ads := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient(xdsAddr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = conn.Close() }()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
		if err != nil {
			return err
		}
		if err := st.Send(&discoveryv3.DiscoveryRequest{TypeUrl: resourcev3.ListenerType}); err != nil {
			return err
		}
		_, err = st.Recv()
		return err
	}
	poll.Until(t, 20*time.Second, "ADS over TLS for Envoy", func() bool { return ads(credentials.NewTLS(tlsWith(&envoy))) == nil })
	if ads(insecure.NewCredentials()) == nil {
		t.Error("ADS answered a plaintext client")
	}
	if ads(credentials.NewTLS(tlsWith(&gw))) == nil {
		t.Error("ADS answered a gateway's certificate")
	}
}

// TestTLSFleetCommand: stargate fleet with TLS flags serves its routers
// over HTTPS only.
func TestTLSFleetCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fleet")
	}
	ca := tlstest.NewCA(t, "fleet")
	leaf := ca.Issue(t, "fleet", "spiffe://stargate/router/fleet")
	url := startInProcess(t, "fleet", "--tls-cert-file", leaf.CertFile, "--tls-private-key-file", leaf.KeyFile, "--tls-ca-file", ca.File)
	if !strings.HasPrefix(url, "https://") {
		t.Fatalf("the fleet's router at %q, want https", url)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 20 * time.Second}).Get(url + "/health")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/health over TLS: %d", resp.StatusCode)
	}
	plain := &http.Client{Timeout: 20 * time.Second}
	defer plain.CloseIdleConnections()
	if resp, err := plain.Get("http://" + strings.TrimPrefix(url, "https://") + "/health"); err == nil {
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Error("the fleet's router answered plaintext")
		}
	}
}
