package main

import (
	"testing"

	"github.com/stargate-llm/stargate/discovery"
	"github.com/stargate-llm/stargate/policy"
	"github.com/stargate-llm/stargate/serve/routerd"
	"github.com/stargate-llm/stargate/xds"
)

// TestXDSEndpoints checks how the router's backends become xDS endpoints:
// weights of at least 1, and a backend that must get no traffic marked, never
// weighted 0.
func TestXDSEndpoints(t *testing.T) {
	in := []routerd.BackendInfo{
		{Name: "a", URL: "http://10.0.0.1:9000", Region: "east", State: "ready", Weight: 50, Eligible: true},
		{Name: "b", URL: "http://gw-b.stargate.svc:9000", State: "ready", Weight: 0, Eligible: true},
		{Name: "c", URL: "http://10.0.0.3:9000", State: "draining", Weight: 0},
		{Name: "d", URL: "http://10.0.0.4:9000", State: "failed", Weight: 25},
		{Name: "e", URL: "https://gw-e.example", State: "ready", Weight: 10, Eligible: false},
		{Name: "f", URL: "::not a url", State: "ready", Weight: 10, Eligible: true},
	}
	got := xdsEndpoints(in)
	want := []xds.Endpoint{
		{ID: "a", Region: "east", Host: "10.0.0.1", Port: 9000, Weight: 50, Health: xds.Healthy},
		{ID: "b", Host: "gw-b.stargate.svc", Port: 9000, Weight: 1, Health: xds.Healthy},
		{ID: "c", Host: "10.0.0.3", Port: 9000, Weight: 1, Health: xds.Draining},
		{ID: "d", Host: "10.0.0.4", Port: 9000, Weight: 25, Health: xds.Unhealthy},
		{ID: "e", Host: "gw-e.example", Port: 443, Weight: 10, Health: xds.Unhealthy},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d endpoints, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("endpoint %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestDiscoveredBackends(t *testing.T) {
	got := discoveredBackends([]discovery.Target{{Addr: "10.0.0.1:9000", Ready: true, Name: "gw-0"}, {Addr: "10.0.0.2:9000", Name: "gw-1"}})
	if len(got) != 2 || got[0] != (routerd.Discovered{Name: "gw-0", URL: "http://10.0.0.1:9000", Ready: true}) || got[1].Ready {
		t.Fatalf("got %+v", got)
	}
}

// TestXDSExportsPlacementWeights: under pressure, the weights a router
// exports to Envoy are the weights its policy places by, for the same
// snapshot of its backends: capacity times the projected level.
func TestXDSExportsPlacementWeights(t *testing.T) {
	cfg := routerd.DefaultConfig()
	cfg.Policy = "pressure"
	cfg.Static = []routerd.StaticBackend{{Name: "a", URL: "http://10.0.0.1:9000", Capacity: 8},
		{Name: "b", URL: "http://10.0.0.2:9000", Capacity: 32}, {Name: "c", URL: "http://10.0.0.3:9000", Capacity: 1}}
	srv, err := routerd.New(cfg, policy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	eps := xdsEndpoints(srv.Backends())
	placed := srv.LastWeights() // as the export's snapshot left them
	if len(eps) != len(cfg.Static) || len(placed) != len(cfg.Static) {
		t.Fatalf("%d endpoints and %d placement weights for %d backends", len(eps), len(placed), len(cfg.Static))
	}
	for i, sb := range cfg.Static {
		if eps[i].ID != sb.Name || int(eps[i].Weight) != placed[i].Weight || placed[i].Weight != policy.PlacementWeight(sb.Capacity, placed[i].Rank) {
			t.Errorf("backend %s: exported weight %d, placement weight %d, capacity %d x level %d", sb.Name, eps[i].Weight, placed[i].Weight, sb.Capacity, placed[i].Rank)
		}
	}
}
