package config

import (
	"fmt"

	"github.com/stargate-llm/stargate/sim"
)

// The routing study's GPUs per backend, by region (docs/DESIGN.md).
var (
	heteroGPUs = [][]int{{7, 4, 2, 3}, {14, 6, 12, 9}, {19, 8, 10, 13}, {11, 16, 15, 20}, {18, 17, 11, 5}}
	homoGPUs   = [][]int{{11, 11, 11, 11}, {11, 11, 11, 11}, {11, 11, 11, 11}, {11, 11, 11, 11}, {11, 11, 11, 11}}
)

// PresetNames lists the built-in fleets.
func PresetNames() []string { return []string{"hetero", "homo", "small", "three-site"} }

// Preset returns a built-in fleet.
func Preset(name string) (*Fleet, bool) {
	var gpus [][]int
	switch name {
	case "small":
		return smallFleet(), true
	case "hetero":
		gpus = heteroGPUs
	case "homo":
		gpus = homoGPUs
	case "three-site":
		return threeSite(), true
	default:
		return nil, false
	}
	f := defaultFleet()
	f.Name = name
	regions := sim.DefaultRegions()
	lat := sim.DefaultLatency()
	for i, r := range regions {
		rs := RegionSpec{Name: r.Name, Routers: r.Routers, RTTms: map[string]float64{}}
		for j, other := range regions {
			rs.RTTms[other.Name] = 2 * float64(lat[i][j].Microseconds()) / 1000
		}
		for k, g := range gpus[i] {
			rs.Backends = append(rs.Backends, BackendFileSpec{Name: fmt.Sprintf("%s-%d", r.Name, k), GPUs: g})
		}
		f.Regions = append(f.Regions, rs)
	}
	return &f, true
}

// smallFleet is one region, one router and two backends of 1 and 2 GPUs:
// a live fleet that starts in a moment on one machine.
func smallFleet() *Fleet {
	f := defaultFleet()
	f.Name = "small"
	f.Regions = []RegionSpec{{Name: "local", Routers: 1,
		Backends: []BackendFileSpec{{Name: "local-0", GPUs: 1}, {Name: "local-1", GPUs: 2}}}}
	return &f
}

// threeSite is the SLO matrix's default fleet: three sites, nine GPUs, each
// GPU its own backend (one engine behind one gateway, as the Solyx AI Grid paper's
// nine cells), two routers per site. Two sites run the newer GPU generation
// (the full profile, twice the speed and KV of half), the third the older
// one. Round trips are those between data centres a few hundred km apart on
// the US east coast, like the Solyx AI Grid paper's three sites.
func threeSite() *Fleet {
	f := defaultFleet()
	f.Name = "three-site"
	sites := []struct {
		name    string
		gpus    int
		profile string
		rtt     map[string]float64
	}{
		{"east", 4, "full", map[string]float64{"east": 1, "central": 12, "west": 24}},
		{"central", 3, "half", map[string]float64{"east": 12, "central": 1, "west": 14}},
		{"west", 2, "full", map[string]float64{"east": 24, "central": 14, "west": 1}},
	}
	for _, site := range sites {
		rs := RegionSpec{Name: site.name, Routers: 2, RTTms: site.rtt}
		for k := range site.gpus {
			rs.Backends = append(rs.Backends, BackendFileSpec{Name: fmt.Sprintf("%s-%d", site.name, k), GPUs: 1, Profile: site.profile})
		}
		f.Regions = append(f.Regions, rs)
	}
	return &f
}
