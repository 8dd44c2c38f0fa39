// Package discovery finds a router's gateways in Kubernetes: a KubeWatcher
// follows the EndpointSlices of one Service (client-go informers) and
// reports its endpoints on one port as Targets, ready or not, each time they
// change. NewClient builds the client from the pod's service account or from
// a kubeconfig file.
//
// A router learns its gateways from three sources that it merges: gateways
// that register themselves, a static list, and this watcher. A Target that
// is not ready is still reported, so the router can drain it rather than
// forget it.
//
// This is a live shell: Run starts the informer's goroutines and stops them
// when its context ends.
package discovery
