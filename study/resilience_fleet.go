package study

import (
	"fmt"
	"math"

	"github.com/stargate-llm/stargate/config"
)

// ResilienceFleet is the resilience study's fleet, shaped after the Solyx AI Grid paper's
// second campaign: three sites (east, central, west) of three backends each,
// one router per site, round trips of 20 ms (east-central), 40 ms
// (central-west) and 60 ms (east-west). Each backend has 4 GPUs of the
// half-scale engine (the Solyx AI Grid paper had one GPU per cell; four keep a cell's
// queueing like a real multi-GPU replica's while the fleet stays small).
// Backend indices: east 0-2, central 3-5, west 6-8.
func ResilienceFleet() *config.Fleet {
	f, _ := config.Preset("homo") // the defaults every fleet file starts from
	f.Name = "sites"
	rtt := map[string]map[string]float64{
		"east":    {"east": 1, "central": 20, "west": 60},
		"central": {"east": 20, "central": 1, "west": 40},
		"west":    {"east": 60, "central": 40, "west": 1},
	}
	f.Regions = nil
	for _, name := range []string{"east", "central", "west"} {
		r := config.RegionSpec{Name: name, Routers: 1, RTTms: rtt[name]}
		for k := range 3 {
			r.Backends = append(r.Backends, config.BackendFileSpec{Name: fmt.Sprintf("%s-%d", name, k), GPUs: 4})
		}
		f.Regions = append(f.Regions, r)
	}
	return f
}

// ResilienceFleetAt is ResilienceFleet with every backend's GPUs scaled
// (rounded, at least 1), and the factor the rate scales by to keep the load
// per GPU: the GPUs kept over the GPUs before. Scale 0 or 1 is full scale.
func ResilienceFleetAt(scale float64) (*config.Fleet, float64) {
	f := ResilienceFleet()
	if scale <= 0 || scale >= 1 {
		return f, 1
	}
	before, after := 0, 0
	for r := range f.Regions {
		for b := range f.Regions[r].Backends {
			bs := &f.Regions[r].Backends[b]
			before += bs.GPUs
			bs.GPUs = max(1, int(math.Round(float64(bs.GPUs)*scale)))
			after += bs.GPUs
		}
	}
	return f, float64(after) / float64(before)
}
