package xds

import (
	"fmt"
	"time"
)

// BuildTime builds the snapshots a push of eps would set, rounds times (at
// least once), with the default options, and returns the mean time one
// build took: the xDS half of the control plane's routing-update overhead,
// for a report (a live Server exports each push's in
// stargate_xds_build_seconds).
func BuildTime(eps []Endpoint, rounds int) (time.Duration, error) {
	o := Options{}.withDefaults()
	st, err := buildStatic(o, "measure-static")
	if err != nil {
		return 0, fmt.Errorf("xds: measuring the build: %w", err)
	}
	norm, err := normalize(eps)
	if err != nil {
		return 0, fmt.Errorf("xds: measuring the build: %w", err)
	}
	rounds = max(rounds, 1)
	start := time.Now()
	for i := range rounds {
		if _, err := buildSnapshots(st, o.ClusterName, fmt.Sprintf("measure-%d", i), norm); err != nil {
			return 0, fmt.Errorf("xds: measuring the build: %w", err)
		}
	}
	return time.Since(start) / time.Duration(rounds), nil
}
