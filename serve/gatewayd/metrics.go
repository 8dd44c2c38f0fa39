package gatewayd

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	reg          *prometheus.Registry
	pushes       prometheus.Counter
	authRejected prometheus.Counter
	all          []prometheus.Collector // everything reg holds
}

// newMetrics exposes the gateway's state under stargate_gateway_*.
func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	labels := prometheus.Labels{"backend": s.cfg.ID}
	m.pushes = prometheus.NewCounter(prometheus.CounterOpts{Name: "stargate_gateway_stats_pushes_total",
		Help: "Stats messages routers accepted.", ConstLabels: labels})
	m.authRejected = prometheus.NewCounter(prometheus.CounterOpts{Name: "stargate_gateway_admin_rejected_total",
		Help: "Admin calls rejected for a bad signature.", ConstLabels: labels})
	m.all = []prometheus.Collector{m.pushes, m.authRejected, collector{s}}
	m.reg.MustRegister(m.all...)
	return m
}

func (m *metrics) handler() http.Handler { return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}) }

// Collectors are the gateway's metrics, for a process that serves them on a
// /metrics of its own too (a router running this gateway in process).
func (s *Server) Collectors() []prometheus.Collector { return s.met.all }

// collector reads the gateway's state at scrape time.
type collector struct {
	s *Server
}

var (
	descRequests    = prometheus.NewDesc("stargate_gateway_requests_total", "Requests by how they ended (completed, failed, rejected) and why.", []string{"outcome", "reason"}, nil)
	descAccepted    = prometheus.NewDesc("stargate_gateway_accepted_total", "Requests the gateway accepted.", nil, nil)
	descActive      = prometheus.NewDesc("stargate_gateway_active", "Requests admitted to the engine.", nil, nil)
	descWaiting     = prometheus.NewDesc("stargate_gateway_waiting", "Requests waiting for admission.", nil, nil)
	descQuarantined = prometheus.NewDesc("stargate_gateway_quarantined_workers", "Workers in quarantine.", nil, nil)
	descQuarantines = prometheus.NewDesc("stargate_gateway_quarantines_total", "Quarantines begun.", nil, nil)
	descFences      = prometheus.NewDesc("stargate_gateway_fence_answers_total", "Fence answers by result.", []string{"result"}, nil)
	descAdmissible  = prometheus.NewDesc("stargate_gateway_admissible_workers", "Workers that can take a request: not quarantined, their engine answering.", nil, nil)
	descRecoveries  = prometheus.NewDesc("stargate_gateway_recoveries_total", "Quarantines ended, by how: fence, operator or engine_restart.", []string{"how"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descRequests, descAccepted, descActive, descWaiting, descQuarantined, descQuarantines, descFences, descAdmissible, descRecoveries} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	counts := c.s.Counts()
	ch <- prometheus.MustNewConstMetric(descAccepted, prometheus.CounterValue, float64(counts.Accepted))
	ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(counts.Completed), "completed", "")
	for r, n := range counts.Failed {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(n), "failed", r)
	}
	for r, n := range counts.Rejected {
		ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(n), "rejected", r)
	}
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.adm == nil {
		return
	}
	quarantined := 0
	for i := range s.workers {
		if s.slots.Quarantined(i) {
			quarantined++
		}
	}
	f := s.slots.Fences()
	ch <- prometheus.MustNewConstMetric(descActive, prometheus.GaugeValue, float64(s.adm.Active()))
	ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(s.adm.Waiting()+s.slots.Waiting()))
	ch <- prometheus.MustNewConstMetric(descQuarantined, prometheus.GaugeValue, float64(quarantined))
	ch <- prometheus.MustNewConstMetric(descQuarantines, prometheus.CounterValue, float64(s.slots.Quarantines()))
	ch <- prometheus.MustNewConstMetric(descAdmissible, prometheus.GaugeValue, float64(s.admissible()))
	for _, how := range []string{recoveredFence, recoveredOperator, recoveredRestart} {
		ch <- prometheus.MustNewConstMetric(descRecoveries, prometheus.CounterValue, float64(s.eh.recoveries[how]), how)
	}
	for _, x := range []struct {
		r string
		n uint64
	}{{"recovered", f.Recovered}, {"bad_signature", f.BadSignature}, {"stale_generation", f.StaleGeneration}, {"replayed", f.Replayed}} {
		ch <- prometheus.MustNewConstMetric(descFences, prometheus.CounterValue, float64(x.n), x.r)
	}
}
