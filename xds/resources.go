package xds

import (
	"fmt"
	"slices"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/wellknown"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The two kinds of xDS client, told apart by the user agent in their node
// (Envoy says "envoy", gRPC says "gRPC Go", "gRPC Java", ...). Each gets a
// snapshot with the listener it can use.
const (
	groupEnvoy = "envoy"
	groupGRPC  = "grpc"
)

// staticResources are the listeners, route and cluster: they depend on the
// Options only, so they keep one version for the life of a Server and a push
// of new weights resends only the ClusterLoadAssignment.
type staticResources struct {
	version string
	// envoyListeners is the HTTP listener on a socket. grpcListeners adds the
	// API listener that proxyless gRPC clients ask for by name; it carries
	// the HTTP listener too so that the snapshot's references can be checked
	// (gRPC asks for listeners by name and never sees it).
	envoyListeners []types.Resource
	grpcListeners  []types.Resource
	routes         []types.Resource
	clusters       []types.Resource
}

func adsSource() *corev3.ConfigSource {
	return &corev3.ConfigSource{
		ResourceApiVersion:    corev3.ApiVersion_V3,
		ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
	}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		// anypb.New fails only for messages that cannot be marshalled; every
		// message here is a generated Envoy type.
		panic(fmt.Sprintf("xds: marshal %T: %v", m, err))
	}
	return a
}

func socketAddress(host string, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:      corev3.SocketAddress_TCP,
		Address:       host,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// buildStatic builds the resources that depend on the options only.
func buildStatic(o Options, version string) (staticResources, error) {
	hcm := &hcmv3.HttpConnectionManager{
		StatPrefix: "stargate",
		CodecType:  hcmv3.HttpConnectionManager_AUTO,
		RouteSpecifier: &hcmv3.HttpConnectionManager_Rds{Rds: &hcmv3.Rds{
			ConfigSource:    adsSource(),
			RouteConfigName: o.RouteName,
		}},
		HttpFilters: []*hcmv3.HttpFilter{{
			Name:       wellknown.Router,
			ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})},
		}},
	}
	httpListener := &listenerv3.Listener{
		Name:    o.ListenerName,
		Address: socketAddress(o.ListenerAddress, o.ListenerPort),
		FilterChains: []*listenerv3.FilterChain{{
			Filters: []*listenerv3.Filter{{
				Name:       wellknown.HTTPConnectionManager,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: mustAny(hcm)},
			}},
		}},
	}
	apiListener := &listenerv3.Listener{
		Name:        o.GRPCListenerName,
		ApiListener: &listenerv3.ApiListener{ApiListener: mustAny(hcm)},
	}
	route := &routev3.RouteConfiguration{
		Name: o.RouteName,
		VirtualHosts: []*routev3.VirtualHost{{
			Name:    "stargate",
			Domains: []string{"*"},
			Routes: []*routev3.Route{{
				Match: &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{
					ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: o.ClusterName},
					// Sessions stick to a backend: the ring hash is keyed by
					// the session header.
					HashPolicy: []*routev3.RouteAction_HashPolicy{{
						PolicySpecifier: &routev3.RouteAction_HashPolicy_Header_{
							Header: &routev3.RouteAction_HashPolicy_Header{HeaderName: o.HashHeader},
						},
					}},
					// Completions stream for minutes: no route timeout
					// (Envoy's default is 15 s).
					Timeout: durationpb.New(0),
				}},
			}},
		}},
	}
	cluster := &clusterv3.Cluster{
		Name:                 o.ClusterName,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig:   adsSource(),
			ServiceName: o.ClusterName,
		},
		ConnectTimeout: durationpb.New(time.Second),
		LbPolicy:       clusterv3.Cluster_RING_HASH,
		LbConfig: &clusterv3.Cluster_RingHashLbConfig_{RingHashLbConfig: &clusterv3.Cluster_RingHashLbConfig{
			MinimumRingSize: wrapperspb.UInt64(o.RingSize),
			HashFunction:    clusterv3.Cluster_RingHashLbConfig_XX_HASH,
		}},
		// No panic mode: by default Envoy spreads traffic over all hosts,
		// unhealthy ones included, once fewer than half are healthy. A
		// backend the router marks unhealthy or draining must get nothing.
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}},
	}
	s := staticResources{
		version:        version,
		envoyListeners: []types.Resource{httpListener},
		grpcListeners:  []types.Resource{apiListener, httpListener},
		routes:         []types.Resource{route},
		clusters:       []types.Resource{cluster},
	}
	for _, r := range []interface{ ValidateAll() error }{httpListener, apiListener, route, cluster} {
		if err := r.ValidateAll(); err != nil {
			return staticResources{}, fmt.Errorf("xds: invalid %T (check the Options): %w", r, err)
		}
	}
	return s, nil
}

var healthStatus = map[Health]corev3.HealthStatus{
	Healthy:   corev3.HealthStatus_HEALTHY,
	Draining:  corev3.HealthStatus_DRAINING,
	Unhealthy: corev3.HealthStatus_UNHEALTHY,
}

// buildLoadAssignment turns normalized endpoints into the cluster's
// ClusterLoadAssignment: one locality per region (sorted), each endpoint with
// its weight, health and ring-hash key (metadata envoy.lb/hash_key = ID).
//
// A locality's weight is the sum of the weights of its endpoints, all health
// states counted. Envoy's ring hash ignores locality weights; gRPC (gRFC
// A113) multiplies the locality's share by the endpoint's share within it,
// and with these locality weights the product is the endpoint's weight over
// the sum of all weights, the same share Envoy gives it.
func buildLoadAssignment(cluster string, eps []Endpoint) *endpointv3.ClusterLoadAssignment {
	byRegion := map[string]*endpointv3.LocalityLbEndpoints{}
	var regions []string
	for _, e := range eps {
		loc, ok := byRegion[e.Region]
		if !ok {
			loc = &endpointv3.LocalityLbEndpoints{
				Locality:            &corev3.Locality{Region: e.Region},
				LoadBalancingWeight: wrapperspb.UInt32(0),
			}
			byRegion[e.Region] = loc
			regions = append(regions, e.Region)
		}
		loc.LoadBalancingWeight.Value += e.Weight
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
				Address:  socketAddress(e.Host, e.Port),
				Hostname: e.ID,
			}},
			HealthStatus:        healthStatus[e.Health],
			LoadBalancingWeight: wrapperspb.UInt32(e.Weight),
			Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
				"envoy.lb": {Fields: map[string]*structpb.Value{"hash_key": structpb.NewStringValue(e.ID)}},
			}},
		})
	}
	slices.Sort(regions)
	cla := &endpointv3.ClusterLoadAssignment{ClusterName: cluster}
	for _, r := range regions {
		cla.Endpoints = append(cla.Endpoints, byRegion[r])
	}
	return cla
}

// buildSnapshots returns the snapshot of each client group for endpoints
// eps (normalized) under version.
func buildSnapshots(st staticResources, cluster, version string, eps []Endpoint) (map[string]*cachev3.Snapshot, error) {
	cla := buildLoadAssignment(cluster, eps)
	if err := cla.ValidateAll(); err != nil {
		return nil, fmt.Errorf("xds: invalid load assignment: %w", err)
	}
	endpoints := cachev3.NewResources(version, []types.Resource{cla})
	out := map[string]*cachev3.Snapshot{}
	for group, listeners := range map[string][]types.Resource{groupEnvoy: st.envoyListeners, groupGRPC: st.grpcListeners} {
		s := &cachev3.Snapshot{}
		s.Resources[types.Listener] = cachev3.NewResources(st.version, listeners)
		s.Resources[types.Route] = cachev3.NewResources(st.version, st.routes)
		s.Resources[types.Cluster] = cachev3.NewResources(st.version, st.clusters)
		s.Resources[types.Endpoint] = endpoints
		if err := s.Consistent(); err != nil {
			return nil, fmt.Errorf("xds: %s snapshot: %w", group, err)
		}
		out[group] = s
	}
	return out, nil
}
