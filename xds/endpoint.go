package xds

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
)

// Health says whether a backend may get new traffic.
type Health int

const (
	// Healthy backends get traffic in proportion to their weight.
	Healthy Health = iota
	// Draining backends finish what they have and get no new traffic
	// (exported as HealthStatus DRAINING).
	Draining
	// Unhealthy backends get no traffic (exported as HealthStatus UNHEALTHY).
	Unhealthy
)

func (h Health) String() string {
	switch h {
	case Healthy:
		return "healthy"
	case Draining:
		return "draining"
	case Unhealthy:
		return "unhealthy"
	}
	return "health(" + strconv.Itoa(int(h)) + ")"
}

// Endpoint is one backend (a gateway) as the router sees it.
type Endpoint struct {
	// ID names the backend. It is the endpoint's ring-hash key (metadata
	// envoy.lb/hash_key), so a backend keeps its place on the ring when its
	// address changes.
	ID string
	// Region becomes the endpoint's locality.
	Region string
	// Host is an IP address or a DNS name; Port its port.
	Host string
	Port uint32
	// Weight is the share of traffic relative to the other healthy endpoints.
	// Zero is read as 1: a backend that must get no traffic says so with
	// Health, never with weight 0.
	Weight uint32
	// Health says whether the endpoint may get new traffic.
	Health Health
}

// maxTotalWeight bounds the sum of all endpoint weights. Envoy requires the
// weights of a locality, and the locality weights, to sum to at most
// MaxUint32; gRPC sums them in 32 bits too. Weights are scaled down
// proportionally (each staying >= 1) when their sum would pass this bound.
const maxTotalWeight = math.MaxUint32 / 2

// normalize returns a copy of eps sorted by ID, with weights clamped to >= 1
// and scaled down proportionally when their sum would pass maxTotalWeight.
// Endpoints that cannot be exported (no ID, a repeated ID, no host, a port
// outside 1-65535, an unknown health) are left out, and the error says which
// and why; the rest are still returned.
func normalize(eps []Endpoint) ([]Endpoint, error) {
	out := make([]Endpoint, 0, len(eps))
	seen := make(map[string]bool, len(eps))
	var errs []error
	var total uint64
	for i, e := range eps {
		var err error
		switch {
		case e.ID == "":
			err = fmt.Errorf("endpoint %d has no ID", i)
		case seen[e.ID]:
			err = fmt.Errorf("endpoint %q is listed twice", e.ID)
		case e.Host == "" || e.Port == 0 || e.Port > math.MaxUint16:
			err = fmt.Errorf("endpoint %q: address %q is not a host and a port in 1-65535", e.ID, net.JoinHostPort(e.Host, strconv.FormatUint(uint64(e.Port), 10)))
		case e.Health < Healthy || e.Health > Unhealthy:
			err = fmt.Errorf("endpoint %q: unknown health %d", e.ID, e.Health)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		seen[e.ID] = true
		e.Weight = max(e.Weight, 1)
		total += uint64(e.Weight)
		out = append(out, e)
	}
	if total > maxTotalWeight {
		scale := float64(maxTotalWeight-uint64(len(out))) / float64(total)
		for i := range out {
			out[i].Weight = max(1, uint32(float64(out[i].Weight)*scale))
		}
	}
	slices.SortFunc(out, func(a, b Endpoint) int { return cmp.Compare(a.ID, b.ID) })
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("xds: endpoints left out: %w", err)
	}
	return out, nil
}
