package routerd

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// newProjectionGauge registers stargate_router_projection_seconds: how long
// the latest projection cycle took, the policy scoring every backend and
// projecting its scores to weights (policy.WeightsOf over the router's
// views), as each export of the weights runs it (the xDS push's tick,
// /v1/stargate/backends, /metrics). With the xDS build time
// (stargate_xds_build_seconds) it is the Solyx AI Grid paper's control-plane
// routing-update overhead.
func newProjectionGauge(reg prometheus.Registerer) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stargate_router_projection_seconds",
		Help: "Time the latest projection cycle took: scoring every backend and projecting the scores to weights.",
	})
	reg.MustRegister(g)
	return g
}

// projected records one projection cycle's duration.
func (s *Server) projected(d time.Duration) {
	if s.met != nil && s.met.proj != nil {
		s.met.proj.Set(d.Seconds())
	}
}
