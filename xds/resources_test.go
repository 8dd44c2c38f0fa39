package xds

import (
	"math"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

func fleet() []Endpoint {
	return []Endpoint{
		{ID: "usw2-a", Region: "usw2", Host: "10.0.0.1", Port: 9000, Weight: 700},
		{ID: "usw2-b", Region: "usw2", Host: "10.0.0.2", Port: 9000, Weight: 200},
		{ID: "ew1-a", Region: "ew1", Host: "10.1.0.1", Port: 9000, Weight: 1900},
		{ID: "ew1-b", Region: "ew1", Host: "10.1.0.2", Port: 9000, Weight: 800, Health: Draining},
		{ID: "as2-a", Region: "as2", Host: "10.2.0.1", Port: 9000, Weight: 500, Health: Unhealthy},
		{ID: "as2-b", Region: "as2", Host: "10.2.0.2", Port: 9000, Weight: 0},
	}
}

func snapshots(t *testing.T, o Options, eps []Endpoint) map[string]*cachev3.Snapshot {
	t.Helper()
	o = o.withDefaults()
	st, err := buildStatic(o, "s")
	if err != nil {
		t.Fatal(err)
	}
	norm, err := normalize(eps)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := buildSnapshots(st, o.ClusterName, "v1", norm)
	if err != nil {
		t.Fatal(err)
	}
	return snaps
}

// TestSnapshotsConsistentAndValid: every group's snapshot passes
// go-control-plane's consistency check, and every resource its validation.
func TestSnapshotsConsistentAndValid(t *testing.T) {
	for _, eps := range [][]Endpoint{fleet(), nil, fleet()[:1]} {
		snaps := snapshots(t, Options{}, eps)
		if len(snaps) != 2 {
			t.Fatalf("%d snapshot groups, want envoy and grpc", len(snaps))
		}
		for group, s := range snaps {
			if err := s.Consistent(); err != nil {
				t.Errorf("%s: %v", group, err)
			}
			for _, typ := range []string{resourcev3.ListenerType, resourcev3.RouteType, resourcev3.ClusterType, resourcev3.EndpointType} {
				res := s.GetResources(typ)
				if len(res) == 0 {
					t.Errorf("%s: no %s", group, typ)
				}
				for name, r := range res {
					if err := r.(interface{ ValidateAll() error }).ValidateAll(); err != nil {
						t.Errorf("%s: %s %q: %v", group, typ, name, err)
					}
				}
			}
		}
	}
}

// TestListenersPerGroup: Envoy gets the HTTP listener only; gRPC also gets
// the API listener it asks for by name.
func TestListenersPerGroup(t *testing.T) {
	snaps := snapshots(t, Options{ListenerPort: 10001}, fleet())
	envoy := snaps[groupEnvoy].GetResources(resourcev3.ListenerType)
	if len(envoy) != 1 || envoy["stargate-http"] == nil {
		t.Fatalf("envoy listeners %v, want stargate-http only", keys(envoy))
	}
	l := envoy["stargate-http"].(*listenerv3.Listener)
	if p := l.GetAddress().GetSocketAddress().GetPortValue(); p != 10001 {
		t.Errorf("listener port %d, want 10001", p)
	}
	api := snaps[groupGRPC].GetResources(resourcev3.ListenerType)["stargate"]
	if api == nil || api.(*listenerv3.Listener).GetApiListener() == nil {
		t.Fatal("grpc group has no API listener named stargate")
	}
	hcm := &hcmv3.HttpConnectionManager{}
	if err := api.(*listenerv3.Listener).GetApiListener().GetApiListener().UnmarshalTo(hcm); err != nil {
		t.Fatal(err)
	}
	if hcm.GetRds().GetRouteConfigName() != "stargate-route" || hcm.GetRds().GetConfigSource().GetAds() == nil {
		t.Errorf("API listener does not take route stargate-route over ADS: %v", hcm.GetRds())
	}
	if n := len(hcm.GetHttpFilters()); n != 1 || hcm.GetHttpFilters()[0].GetName() != "envoy.filters.http.router" {
		t.Errorf("http filters %v, want the router alone", hcm.GetHttpFilters())
	}
}

// TestRouteAndCluster: the session header keys a ring hash with no route
// timeout and no panic mode.
func TestRouteAndCluster(t *testing.T) {
	s := snapshots(t, Options{HashHeader: "X-Session-ID", ClusterName: "gw"}, fleet())[groupEnvoy]
	r := s.GetResources(resourcev3.RouteType)["stargate-route"].(*routev3.RouteConfiguration)
	action := r.GetVirtualHosts()[0].GetRoutes()[0].GetRoute()
	if action.GetCluster() != "gw" {
		t.Errorf("route to %q, want gw", action.GetCluster())
	}
	if h := action.GetHashPolicy()[0].GetHeader().GetHeaderName(); h != "x-session-id" {
		t.Errorf("hash header %q, want x-session-id", h)
	}
	if action.GetTimeout() == nil || action.GetTimeout().AsDuration() != 0 {
		t.Errorf("route timeout %v, want 0 (none)", action.GetTimeout())
	}
	c := s.GetResources(resourcev3.ClusterType)["gw"].(*clusterv3.Cluster)
	if c.GetType() != clusterv3.Cluster_EDS || c.GetLbPolicy() != clusterv3.Cluster_RING_HASH {
		t.Errorf("cluster type %v lb %v, want EDS RING_HASH", c.GetType(), c.GetLbPolicy())
	}
	if c.GetEdsClusterConfig().GetEdsConfig().GetAds() == nil || c.GetEdsClusterConfig().GetServiceName() != "gw" {
		t.Errorf("cluster does not take endpoints gw over ADS: %v", c.GetEdsClusterConfig())
	}
	if c.GetRingHashLbConfig().GetMinimumRingSize().GetValue() != 4096 {
		t.Errorf("ring size %v", c.GetRingHashLbConfig().GetMinimumRingSize())
	}
	if p := c.GetCommonLbConfig().GetHealthyPanicThreshold(); p == nil || p.GetValue() != 0 {
		t.Errorf("panic threshold %v, want 0", p)
	}
	if s.GetResources(resourcev3.EndpointType)["gw"] == nil {
		t.Error("no load assignment named gw")
	}
}

// TestLoadAssignment: weights, health, localities and ring-hash keys.
func TestLoadAssignment(t *testing.T) {
	s := snapshots(t, Options{}, fleet())[groupEnvoy]
	cla := s.GetResources(resourcev3.EndpointType)["stargate-gateways"].(*endpointv3.ClusterLoadAssignment)
	want := map[string]struct {
		region string
		weight uint32
		health corev3.HealthStatus
	}{
		"usw2-a": {"usw2", 700, corev3.HealthStatus_HEALTHY},
		"usw2-b": {"usw2", 200, corev3.HealthStatus_HEALTHY},
		"ew1-a":  {"ew1", 1900, corev3.HealthStatus_HEALTHY},
		"ew1-b":  {"ew1", 800, corev3.HealthStatus_DRAINING},
		"as2-a":  {"as2", 500, corev3.HealthStatus_UNHEALTHY},
		"as2-b":  {"as2", 1, corev3.HealthStatus_HEALTHY},
	}
	var regions []string
	seen := 0
	for _, loc := range cla.GetEndpoints() {
		regions = append(regions, loc.GetLocality().GetRegion())
		var sum uint32
		for _, lb := range loc.GetLbEndpoints() {
			seen++
			id := lb.GetMetadata().GetFilterMetadata()["envoy.lb"].GetFields()["hash_key"].GetStringValue()
			w, ok := want[id]
			if !ok {
				t.Errorf("unexpected endpoint with hash key %q", id)
				continue
			}
			if got := lb.GetLoadBalancingWeight().GetValue(); got != w.weight {
				t.Errorf("%s weight %d, want %d", id, got, w.weight)
			}
			if lb.GetHealthStatus() != w.health {
				t.Errorf("%s health %v, want %v", id, lb.GetHealthStatus(), w.health)
			}
			if loc.GetLocality().GetRegion() != w.region {
				t.Errorf("%s in locality %q, want %q", id, loc.GetLocality().GetRegion(), w.region)
			}
			if lb.GetLoadBalancingWeight().GetValue() == 0 {
				t.Errorf("%s has weight 0", id)
			}
			sum += lb.GetLoadBalancingWeight().GetValue()
		}
		if loc.GetLoadBalancingWeight().GetValue() != sum {
			t.Errorf("locality %s weight %d, want the sum of its endpoints %d", loc.GetLocality().GetRegion(), loc.GetLoadBalancingWeight().GetValue(), sum)
		}
	}
	if seen != len(want) {
		t.Errorf("%d endpoints, want %d", seen, len(want))
	}
	if strings.Join(regions, ",") != "as2,ew1,usw2" {
		t.Errorf("localities %v, want sorted", regions)
	}
}

// TestGRPCShareEqualsEnvoyShare: gRPC's effective endpoint weight (gRFC
// A113: locality share times endpoint share within the locality) equals
// the endpoint's weight over the total, which is what Envoy's ring hash uses.
func TestGRPCShareEqualsEnvoyShare(t *testing.T) {
	s := snapshots(t, Options{}, fleet())[groupGRPC]
	cla := s.GetResources(resourcev3.EndpointType)["stargate-gateways"].(*endpointv3.ClusterLoadAssignment)
	var locSum, total float64
	for _, loc := range cla.GetEndpoints() {
		locSum += float64(loc.GetLoadBalancingWeight().GetValue())
		for _, lb := range loc.GetLbEndpoints() {
			total += float64(lb.GetLoadBalancingWeight().GetValue())
		}
	}
	for _, loc := range cla.GetEndpoints() {
		var inLoc float64
		for _, lb := range loc.GetLbEndpoints() {
			inLoc += float64(lb.GetLoadBalancingWeight().GetValue())
		}
		for _, lb := range loc.GetLbEndpoints() {
			w := float64(lb.GetLoadBalancingWeight().GetValue())
			grpc := float64(loc.GetLoadBalancingWeight().GetValue()) / locSum * w / inLoc
			if envoy := w / total; math.Abs(grpc-envoy) > 1e-12 {
				t.Errorf("%s: gRPC share %v, Envoy share %v", lb.GetEndpoint().GetHostname(), grpc, envoy)
			}
		}
	}
}

func TestNewServerRejectsBadOptions(t *testing.T) {
	for _, o := range []Options{{ListenerPort: 70000}, {RingSize: 1 << 30}} {
		if _, err := NewServer(o); err == nil {
			t.Errorf("NewServer(%+v) accepted", o)
		} else if !strings.Contains(err.Error(), "check the Options") {
			t.Errorf("error %q does not say what to fix", err)
		}
	}
}

func keys(m map[string]types.Resource) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
