package xds

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startServer serves s on a loopback port until the test ends, and checks
// that Serve returns nil then.
func startServer(t *testing.T, s *Server) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return lis.Addr().String()
}

// adsStream is a bare ADS client: it asks, it reads, it ACKs.
type adsStream struct {
	t      *testing.T
	stream discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesClient
	node   *corev3.Node
}

func dialADS(t *testing.T, ctx context.Context, addr, userAgent string) *adsStream {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	st, err := discoveryv3.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &adsStream{t: t, stream: st, node: &corev3.Node{Id: "test-" + userAgent, UserAgentName: userAgent}}
}

func (a *adsStream) ask(typeURL, version, nonce string, names ...string) {
	a.t.Helper()
	if err := a.stream.Send(&discoveryv3.DiscoveryRequest{
		Node: a.node, TypeUrl: typeURL, VersionInfo: version, ResponseNonce: nonce, ResourceNames: names,
	}); err != nil {
		a.t.Fatal(err)
	}
}

func (a *adsStream) recv() *discoveryv3.DiscoveryResponse {
	a.t.Helper()
	r, err := a.stream.Recv()
	if err != nil {
		a.t.Fatalf("recv: %v", err)
	}
	return r
}

func loadAssignment(t *testing.T, r *discoveryv3.DiscoveryResponse) *endpointv3.ClusterLoadAssignment {
	t.Helper()
	if r.GetTypeUrl() != resourcev3.EndpointType || len(r.GetResources()) != 1 {
		t.Fatalf("response %s with %d resources, want one load assignment", r.GetTypeUrl(), len(r.GetResources()))
	}
	cla := &endpointv3.ClusterLoadAssignment{}
	if err := r.GetResources()[0].UnmarshalTo(cla); err != nil {
		t.Fatal(err)
	}
	return cla
}

func weightOf(cla *endpointv3.ClusterLoadAssignment, id string) uint32 {
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			if lb.GetEndpoint().GetHostname() == id {
				return lb.GetLoadBalancingWeight().GetValue()
			}
		}
	}
	return 0
}

// TestServerPushes: no snapshot before the first Update; a burst of updates
// is one push of the latest weights; a change under the threshold arms no
// push; each push has a new version and is counted.
func TestServerPushes(t *testing.T) {
	reg := prometheus.NewRegistry()
	s, err := NewServer(Options{Window: 50 * time.Millisecond, Registerer: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// A hand-driven clock: the test fires the push timer itself.
	clock := time.Unix(1000, 0)
	var timers []func()
	var delays []time.Duration
	s.now = func() time.Time { return clock }
	s.afterFunc = func(d time.Duration, f func()) {
		timers = append(timers, f)
		delays = append(delays, d)
	}
	fire := func(advance time.Duration) {
		t.Helper()
		if len(timers) != 1 {
			t.Fatalf("%d push timers armed, want 1", len(timers))
		}
		f := timers[0]
		timers, delays = nil, nil
		clock = clock.Add(advance)
		f()
	}
	addr := startServer(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	if _, err := s.cache.GetSnapshot(groupEnvoy); err == nil || s.Version() != "" {
		t.Fatal("a snapshot exists before the first Update")
	}
	a := dialADS(t, ctx, addr, "envoy")
	a.ask(resourcev3.EndpointType, "", "", "stargate-gateways")

	for w := uint32(1); w <= 10; w++ {
		s.Update(eps3(w*100, 100, 100))
		clock = clock.Add(time.Millisecond)
	}
	if len(delays) != 1 || delays[0] != 50*time.Millisecond {
		t.Fatalf("a burst armed timers after %v, want one after the 50ms window", delays)
	}
	fire(40 * time.Millisecond)
	r := a.recv()
	cla := loadAssignment(t, r)
	if got := weightOf(cla, "a"); got != 1000 {
		t.Errorf("pushed weight of a = %d, want the latest (1000)", got)
	}
	if got := testutil.ToFloat64(s.m.pushes); got != 1 {
		t.Errorf("pushes after a burst = %v, want 1", got)
	}
	v1 := r.GetVersionInfo()
	if v1 != s.Version() || !strings.HasSuffix(v1, "-1") {
		t.Errorf("version %q, server says %q, want <boot>-1", v1, s.Version())
	}
	a.ask(resourcev3.EndpointType, v1, r.GetNonce(), "stargate-gateways")

	// 1000:100:100 -> 1050:100:100 moves no share by 10%: nothing is armed.
	s.Update(eps3(1050, 100, 100))
	if len(timers) != 0 {
		t.Error("a change under the threshold armed a push")
	}

	// Draining b is always pushed.
	next := with(eps3(1050, 100, 100), func(e []Endpoint) { e[1].Health = Draining })
	s.Update(next)
	fire(50 * time.Millisecond)
	r = a.recv()
	cla = loadAssignment(t, r)
	if r.GetVersionInfo() == v1 || !strings.HasSuffix(r.GetVersionInfo(), "-2") {
		t.Errorf("second version %q after %q", r.GetVersionInfo(), v1)
	}
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			if lb.GetEndpoint().GetHostname() == "b" && lb.GetHealthStatus() != corev3.HealthStatus_DRAINING {
				t.Errorf("b is %v, want DRAINING", lb.GetHealthStatus())
			}
		}
	}
	if got := testutil.ToFloat64(s.m.pushes); got != 2 {
		t.Errorf("pushes = %v, want 2", got)
	}
	if got := testutil.ToFloat64(s.m.updates); got != 12 {
		t.Errorf("updates = %v, want 12", got)
	}
	if got := testutil.ToFloat64(s.m.version); got != 2 {
		t.Errorf("version gauge = %v, want 2", got)
	}
	if got := testutil.ToFloat64(s.m.endpoints.WithLabelValues("draining")); got != 1 {
		t.Errorf("draining endpoints = %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "stargate_xds_pushes_total"); err != nil || n != 1 {
		t.Errorf("stargate_xds_pushes_total not registered: %d %v", n, err)
	}
}

// TestServerGroups: an Envoy node sees the HTTP listener only; a gRPC node
// gets its API listener by name.
func TestServerGroups(t *testing.T) {
	s, err := NewServer(Options{Window: -1, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s.Update(eps3(1, 2, 3))
	addr := startServer(t, s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	names := func(r *discoveryv3.DiscoveryResponse) []string {
		var out []string
		for _, res := range r.GetResources() {
			l := &listenerv3.Listener{}
			if err := res.UnmarshalTo(l); err != nil {
				t.Fatal(err)
			}
			out = append(out, l.GetName())
		}
		return out
	}

	// Wait for the push (no window: the timer fires at once).
	for s.Version() == "" {
		select {
		case <-ctx.Done():
			t.Fatal("no push")
		case <-time.After(5 * time.Millisecond):
		}
	}
	envoy := dialADS(t, ctx, addr, "envoy")
	envoy.ask(resourcev3.ListenerType, "", "")
	if got := names(envoy.recv()); len(got) != 1 || got[0] != "stargate-http" {
		t.Errorf("Envoy's wildcard listeners %v, want [stargate-http]", got)
	}
	g := dialADS(t, ctx, addr, "gRPC Go")
	g.ask(resourcev3.ListenerType, "", "", "stargate")
	if got := names(g.recv()); len(got) != 1 || got[0] != "stargate" {
		t.Errorf("gRPC's listeners %v, want [stargate]", got)
	}
}

// TestServeStopsWithContext: Serve returns nil when its context ends, with
// a client still connected, and leaves no goroutine (TestMain checks).
func TestServeStopsWithContext(t *testing.T) {
	s, err := NewServer(Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, lis) }()
	cctx, ccancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer ccancel()
	a := dialADS(t, cctx, lis.Addr().String(), "envoy")
	a.ask(resourcev3.ClusterType, "", "")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v, want nil", err)
		}
	case <-cctx.Done():
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := a.stream.Recv(); err == nil {
		t.Error("stream still open after Serve returned")
	}
}

var quiet = slog.New(slog.DiscardHandler)
