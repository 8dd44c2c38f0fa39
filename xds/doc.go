// Package xds exports the router's backends to Envoy and to proxyless gRPC
// clients over xDS (the aggregated discovery service, ADS, of
// envoyproxy/go-control-plane).
//
// A Server serves the chain both kinds of client need:
//
//	Listener -> RouteConfiguration -> Cluster (EDS, ring hash) -> ClusterLoadAssignment
//
// Envoy gets an HTTP listener on a socket (Options.ListenerName, port
// Options.ListenerPort); gRPC clients get an API listener
// (Options.GRPCListenerName) that they ask for by name when they dial
// "xds:///<name>". Clients are told apart by the user agent of their node.
// The route sends every path to one cluster whose ring hash is keyed by the
// session header (Options.HashHeader), with no route timeout, so a session's
// turns reach the same backend and long streams are not cut. The cluster's
// load assignment has one locality per region and one endpoint per backend:
// its weight is the router's current policy weight (an integer >= 1; zero is
// read as 1), its health Healthy, Draining or Unhealthy, and its ring-hash key
// (metadata envoy.lb/hash_key) the backend's ID, so a backend keeps its place
// on the ring when its address changes. A backend that must get no traffic is
// marked Draining or Unhealthy, or left out, never given weight 0. Panic mode
// is off (healthy_panic_threshold 0): Envoy never sends traffic to backends
// marked unhealthy, however few are healthy.
//
// Snapshots are versioned and consistent. The listeners, route and cluster
// keep one version for the life of a Server; each push gives the load
// assignment a new version "<boot>-<sequence>", unique across restarts.
// Update decides what to push through a Coalescer (a pure, clock-free piece):
// membership, address and health changes are always pushed; weight changes
// only when some healthy backend's traffic share moves by more than the
// threshold (10% relative by default); and a burst of updates within the
// window (200 ms) becomes one push. Pushes are counted in
// stargate_xds_pushes_total; the latest sequence number is
// stargate_xds_snapshot_version.
//
// When the control plane goes away, Envoy and gRPC keep the configuration
// they last accepted and go on routing with it, retrying the connection; a
// restarted Server pushes nothing until its first Update, so a client never
// trades the endpoints it holds for an empty list.
//
// Update is safe for concurrent use; the push runs on a timer goroutine.
package xds
