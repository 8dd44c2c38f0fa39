package routerd

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	reg  *prometheus.Registry
	lat  *latency
	proj prometheus.Gauge // the latest projection cycle (controlplane.go)
}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collector{s})
	m.lat = newLatency(m.reg)
	m.proj = newProjectionGauge(m.reg)
	return m
}

// Registerer lets other parts of the router process (the xDS server) add
// their metrics to the router's /metrics.
func (s *Server) Registerer() prometheus.Registerer { return s.met.reg }

func (m *metrics) handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

type collector struct{ s *Server }

var (
	descRequests = prometheus.NewDesc("stargate_router_requests_total", "Requests by how they ended (completed, failed, rejected) and why.", []string{"outcome", "reason"}, nil)
	descAccepted = prometheus.NewDesc("stargate_router_accepted_total", "Requests the router accepted.", nil, nil)
	descAttempts = prometheus.NewDesc("stargate_router_attempts_total", "Attempts sent to backends, retries included.", nil, nil)
	descRetries  = prometheus.NewDesc("stargate_router_retries_total", "Attempts after the first, before any byte reached the client.", nil, nil)
	descBackends = prometheus.NewDesc("stargate_router_backends", "Backends by state.", []string{"state"}, nil)
	descWeight   = prometheus.NewDesc("stargate_router_backend_weight", "The policy's current weight of each backend.", []string{"backend"}, nil)
	descPending  = prometheus.NewDesc("stargate_router_backend_pending", "This router's dispatches the backend's stats do not count yet.", []string{"backend"}, nil)
	descWaiting  = prometheus.NewDesc("stargate_router_waiting", "Requests waiting at this router.", nil, nil)
	descAuth     = prometheus.NewDesc("stargate_router_stats_rejected_total", "Stats messages rejected, by reason.", []string{"reason"}, nil)
	descFallback = prometheus.NewDesc("stargate_telemetry_fallback", "1 when a backend's score runs without hardware signals (its DCGM source is missing).", []string{"backend"}, nil)
	descErrRate  = prometheus.NewDesc("stargate_router_backend_error_rate", "Each backend's recent error rate as this router saw it.", []string{"backend"}, nil)
	descRTT      = prometheus.NewDesc("stargate_router_backend_rtt_seconds", "Smoothed probe round trip to each backend.", []string{"backend"}, nil)
	descLinks    = prometheus.NewDesc("stargate_router_http2_connections", "HTTP/2 connections from this router to gateways open now (many streams each).", nil, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descAccepted, descAttempts, descRetries, descBackends, descWeight, descPending, descWaiting, descAuth, descFallback, descErrRate, descRTT, descLinks} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	counts := c.s.Counts()
	ch <- prometheus.MustNewConstMetric(descAccepted, prometheus.CounterValue, float64(counts.Accepted))
	ch <- prometheus.MustNewConstMetric(descAttempts, prometheus.CounterValue, float64(counts.Attempts))
	ch <- prometheus.MustNewConstMetric(descRetries, prometheus.CounterValue, float64(counts.Retries))
	ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(counts.Completed), "completed", "")
	for r, n := range counts.Failed {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(n), "failed", r)
	}
	for r, n := range counts.Rejected {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(n), "rejected", r)
	}
	states := map[string]int{"loading": 0, "ready": 0, "draining": 0, "terminated": 0, "failed": 0}
	for _, b := range c.s.Backends() {
		states[b.State]++
		ch <- prometheus.MustNewConstMetric(descWeight, prometheus.GaugeValue, float64(b.Weight), b.Name)
		fb := 0.0
		if b.Fallback {
			fb = 1
		}
		ch <- prometheus.MustNewConstMetric(descFallback, prometheus.GaugeValue, fb, b.Name)
		ch <- prometheus.MustNewConstMetric(descErrRate, prometheus.GaugeValue, b.Status.ErrorRate, b.Name)
		ch <- prometheus.MustNewConstMetric(descRTT, prometheus.GaugeValue, b.Status.RTT.Seconds(), b.Name)
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(b.Pending), b.Name)
	}
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(descBackends, prometheus.GaugeValue, float64(n), st)
	}
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(c.s.waiting()))
	ch <- prometheus.MustNewConstMetric(descLinks, prometheus.GaugeValue, float64(c.s.HTTP2Conns()))
	if c.s.verify != nil {
		_, rej := c.s.verify.Counts()
		for r, n := range rej {
			ch <- prometheus.MustNewConstMetric(descAuth, prometheus.CounterValue, float64(n), r)
		}
	}
}

// waiting is how many requests wait at the router.
func (s *Server) waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waits)
}
